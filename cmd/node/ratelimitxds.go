package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leapcount/leapcount/internal/xdsconfig"
)

// CONFIG_TYPE=GRPC_XDS_SOTW: the rules come from an xDS management server (package
// xdsconfig) instead of RUNTIME_ROOT's files, subscribed to as envoyproxy/ratelimit
// subscribes, with its CONFIG_GRPC_XDS_* and XDS_CLIENT_* variables. A value that
// cannot be honoured is refused by name.

// xdsSettings is the subscription the variables describe.
func xdsSettings(e *rlEnv) (*xdsconfig.Config, error) {
	c := &xdsconfig.Config{Server: e.str("CONFIG_GRPC_XDS_SERVER_URL"), NodeID: e.str("CONFIG_GRPC_XDS_NODE_ID"),
		Jitter: e.on("XDS_CLIENT_BACKOFF_JITTER")}
	var err error
	if c.NodeMetadata, err = nodeMetadata(e); err != nil {
		return nil, err
	}
	if c.Headers, err = xdsHeaders(e); err != nil {
		return nil, err
	}
	if c.TLS, err = xdsTLS(e); err != nil {
		return nil, err
	}
	durations := []struct {
		name string
		out  *time.Duration
	}{{"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", &c.ConnectRetry},
		{"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", &c.Backoff.Initial}, {"XDS_CLIENT_BACKOFF_MAX_INTERVAL", &c.Backoff.Max}}
	for _, d := range durations {
		if *d.out, _ = time.ParseDuration(e.str(d.name)); *d.out <= 0 {
			return nil, fmt.Errorf("%s=%s: want a duration above 0", d.name, e.str(d.name))
		}
	}
	if c.Backoff.Max < c.Backoff.Initial {
		return nil, fmt.Errorf("XDS_CLIENT_BACKOFF_MAX_INTERVAL=%s: want at least XDS_CLIENT_BACKOFF_INITIAL_INTERVAL (%s)",
			e.str("XDS_CLIENT_BACKOFF_MAX_INTERVAL"), e.str("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL"))
	}
	if c.Backoff.Factor, _ = strconv.ParseFloat(e.str("XDS_CLIENT_BACKOFF_RANDOM_FACTOR"), 64); !(c.Backoff.Factor > 0) {
		return nil, fmt.Errorf("XDS_CLIENT_BACKOFF_RANDOM_FACTOR=%s: want a number above 0 (each wait is the one before times it)", e.str("XDS_CLIENT_BACKOFF_RANDOM_FACTOR"))
	}
	if s := e.str("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES"); s != "" {
		if c.MaxMessageBytes, _ = strconv.Atoi(s); c.MaxMessageBytes < 0 {
			return nil, fmt.Errorf("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES=%s: want 0 (gRPC's 4 MiB) or more", s)
		}
	}
	return c, nil
}

// nodeMetadata reads CONFIG_GRPC_XDS_NODE_METADATA, key=value,... (envoyproxy/ratelimit
// passes over an entry without '='; leapcount refuses it).
func nodeMetadata(e *rlEnv) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(e.str("CONFIG_GRPC_XDS_NODE_METADATA"), ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("CONFIG_GRPC_XDS_NODE_METADATA=%s: want key=value,... (%q has no '=')", e.str("CONFIG_GRPC_XDS_NODE_METADATA"), kv)
		}
		out[k] = v
	}
	return out, nil
}

// xdsHeaders reads CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS (key:value,..., its
// syntax checked with the others') and refuses a header gRPC would refuse or drop.
func xdsHeaders(e *rlEnv) (map[string]string, error) {
	const name = "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"
	out := map[string]string{}
	for _, kv := range splitMapItems(e.str(name)) {
		k, v, _ := strings.Cut(kv, ":")
		k = strings.ToLower(k)
		if err := checkHeader(k, v); err != nil {
			return nil, fmt.Errorf("%s=%s: header %q: %v", name, e.str(name), k, err)
		}
		out[k] = v
	}
	return out, nil
}

// splitMapItems is the items of a map variable as envconfig reads it ("" has none).
func splitMapItems(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// checkMapItems checks a map variable's syntax as envconfig does: each item is
// key:value, with one ':'.
func checkMapItems(s string) error {
	for _, kv := range splitMapItems(s) {
		if strings.Count(kv, ":") != 1 {
			return fmt.Errorf("want key:value,... (%q is not key:value)", kv)
		}
	}
	return nil
}

// grpcReserved are the headers gRPC sets itself and drops from a call's metadata.
var grpcReserved = map[string]bool{"content-type": true, "user-agent": true, "te": true}

// checkHeader refuses a header gRPC refuses (a key but of 0-9 a-z - _ .; a value but
// of printable ASCII, unless the key ends in -bin) or sets itself.
func checkHeader(k, v string) error {
	if k == "" || strings.Trim(k, "0123456789abcdefghijklmnopqrstuvwxyz-_.") != "" {
		return fmt.Errorf("a header's name is of 0-9, a-z, '-', '_' and '.'")
	}
	if grpcReserved[k] || strings.HasPrefix(k, "grpc-") {
		return fmt.Errorf("gRPC sets it itself")
	}
	if !strings.HasSuffix(k, "-bin") && strings.IndexFunc(v, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0 {
		return fmt.Errorf("a value is of printable ASCII (or its name ends in -bin)")
	}
	return nil
}

// xdsTLS is the TLS to the server with CONFIG_GRPC_XDS_SERVER_USE_TLS (nil: plaintext),
// as envoyproxy/ratelimit makes it: a client certificate when both its files are set,
// the system's roots with CONFIG_GRPC_XDS_SERVER_TLS_CACERT's added, and the server's
// name checked against CONFIG_GRPC_XDS_SERVER_TLS_SAN when set (else the host
// dialled). The files are read at start.
func xdsTLS(e *rlEnv) (*tls.Config, error) {
	if !e.on("CONFIG_GRPC_XDS_SERVER_USE_TLS") {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: e.str("CONFIG_GRPC_XDS_SERVER_TLS_SAN")}
	cert, key := e.str("CONFIG_GRPC_XDS_CLIENT_TLS_CERT"), e.str("CONFIG_GRPC_XDS_CLIENT_TLS_KEY")
	switch {
	case cert != "" && key != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("CONFIG_GRPC_XDS_CLIENT_TLS_CERT=%s, CONFIG_GRPC_XDS_CLIENT_TLS_KEY=%s: %v", cert, key, err)
		}
		c.Certificates = []tls.Certificate{pair}
	case cert != "":
		return nil, fmt.Errorf("CONFIG_GRPC_XDS_CLIENT_TLS_CERT=%s: set CONFIG_GRPC_XDS_CLIENT_TLS_KEY too", cert)
	case key != "":
		return nil, fmt.Errorf("CONFIG_GRPC_XDS_CLIENT_TLS_KEY=%s: set CONFIG_GRPC_XDS_CLIENT_TLS_CERT too", key)
	}
	if ca := e.str("CONFIG_GRPC_XDS_SERVER_TLS_CACERT"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("CONFIG_GRPC_XDS_SERVER_TLS_CACERT=%s: %v", ca, err)
		}
		if c.RootCAs, _ = x509.SystemCertPool(); c.RootCAs == nil {
			c.RootCAs = x509.NewCertPool()
		}
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CONFIG_GRPC_XDS_SERVER_TLS_CACERT=%s: no PEM certificate in it", ca)
		}
	}
	return c, nil
}
