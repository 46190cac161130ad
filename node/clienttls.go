package node

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leapcount/leapcount/internal/certfiles"
	"github.com/leapcount/leapcount/internal/connlimit"
)

// Client TLS (docs/security.md, Client TLS): --resp-tls, --resp-cluster-tls,
// --http-tls and --grpc-tls serve the same front ends as their plaintext twins, over
// TLS 1.2 and up, presenting --client-tls-cert. The files are watched by one
// certfiles.Source, so a new certificate (or CA) applies to the next handshake on
// every port while open connections go on.

// tlsAddrs are the TLS listeners' flags and addresses, in the order errors name them.
func (c *Config) tlsAddrs() []struct{ flag, v string } {
	return []struct{ flag, v string }{{"resp-tls", c.RESPTLSAddr}, {"resp-cluster-tls", c.RESPClusterTLSAddr},
		{"http-tls", c.HTTPTLSAddr}, {"grpc-tls", c.GRPCTLSAddr}}
}

// servesTLS reports whether any TLS listener is set.
func (c *Config) servesTLS() bool {
	for _, a := range c.tlsAddrs() {
		if a.v != "" {
			return true
		}
	}
	return false
}

// validateClientTLS checks the client TLS flags: each address, the certificate and key
// together, and that neither the files nor the listeners come without the other.
func (c *Config) validateClientTLS() error {
	for _, a := range c.tlsAddrs() {
		if a.v == "" {
			continue
		}
		if err := checkHostPort(a.v); err != nil {
			return &ConfigError{a.flag, err.Error()}
		}
		if c.ClientTLSCertFile == "" || c.ClientTLSKeyFile == "" {
			return &ConfigError{a.flag, "needs --client-tls-cert and --client-tls-key: the certificate the TLS ports present"}
		}
	}
	switch {
	case c.RESPCluster != "" && c.RESPClusterTLSAddr != "":
		return &ConfigError{"resp-cluster-tls", "give --resp-cluster or --resp-cluster-tls, not both: a node tells Redis Cluster clients one address"}
	case c.ClientTLSCertFile != "" && c.ClientTLSKeyFile == "":
		return &ConfigError{"client-tls-key", "needed with --client-tls-cert"}
	case c.ClientTLSKeyFile != "" && c.ClientTLSCertFile == "":
		return &ConfigError{"client-tls-cert", "needed with --client-tls-key"}
	case c.ClientTLSCAFile != "" && c.ClientTLSCertFile == "":
		return &ConfigError{"client-tls-ca", "needs --client-tls-cert and --client-tls-key"}
	case c.ClientTLSCertFile != "" && !c.servesTLS():
		return &ConfigError{"client-tls-cert", "no TLS listener uses it: set --resp-tls, --http-tls, --grpc-tls or --resp-cluster-tls"}
	}
	return nil
}

// openClientTLS reads the client TLS files and starts watching them, when a TLS
// listener is set; a file that is missing or wrong is a ConfigError naming its flag.
func (n *Node) openClientTLS() error {
	if !n.cfg.servesTLS() {
		return nil
	}
	src, err := certfiles.New(certfiles.Files{Cert: n.cfg.ClientTLSCertFile, Key: n.cfg.ClientTLSKeyFile, CA: n.cfg.ClientTLSCAFile,
		CertFlag: "--client-tls-cert", KeyFlag: "--client-tls-key", CAFlag: "--client-tls-ca"}, n.cfg.Logger.With("tls", "client"))
	if err != nil {
		return &ConfigError{"client-tls-cert", err.Error()}
	}
	n.clientTLS = src
	if n.cfg.TLSHandshakeRate > 0 {
		n.handshakes = newHandshakePacer(n.cfg.TLSHandshakeRate)
		p := n.handshakes
		n.reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "leapcount_client_tls_handshakes_paced_total",
				Help: "Client TLS handshakes past --tls-handshake-rate, by result (waited: began after a wait; refused: closed, their turn too far off).", ConstLabels: prometheus.Labels{"result": "waited"}},
				func() float64 { return float64(p.waited.Load() - p.refused.Load()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "leapcount_client_tls_handshakes_paced_total",
				Help: "Client TLS handshakes past --tls-handshake-rate, by result (waited: began after a wait; refused: closed, their turn too far off).", ConstLabels: prometheus.Labels{"result": "refused"}},
				func() float64 { return float64(p.refused.Load()) }))
	}
	n.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "leapcount_client_tls_reloads_total",
			Help: "Times the client TLS files (--client-tls-*) changed, by result (ok: taken; error: the certificate in use stayed).", ConstLabels: prometheus.Labels{"result": "ok"}},
			func() float64 { return float64(src.Reloads()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "leapcount_client_tls_reloads_total",
			Help: "Times the client TLS files (--client-tls-*) changed, by result (ok: taken; error: the certificate in use stayed).", ConstLabels: prometheus.Labels{"result": "error"}},
			func() float64 { return float64(src.Errors()) }))
	return nil
}

// closeClientTLS stops watching the client TLS files.
func (n *Node) closeClientTLS() {
	if n.clientTLS != nil {
		n.clientTLS.Close()
	}
}

// listenTLS opens the RESP and HTTP TLS listeners (gRPC's is listenGRPC's). The RESP
// ones stay plain TCP listeners: respapi runs the handshake on each connection's
// goroutine. The HTTP one caps connections under the TLS layer, so that a refused
// connection costs no handshake.
func (n *Node) listenTLS() error {
	var err error
	if a := n.cfg.RESPTLSAddr; a != "" {
		if n.respTLSLn, err = n.cfg.Listen("tcp", a); err != nil {
			return &ConfigError{"resp-tls", err.Error()}
		}
	}
	if a := n.cfg.RESPClusterTLSAddr; a != "" {
		if n.respClusterLn, err = n.cfg.Listen("tcp", a); err != nil {
			return &ConfigError{"resp-cluster-tls", err.Error()}
		}
		n.respClusterTLS = true
	}
	if a := n.cfg.HTTPTLSAddr; a != "" {
		ln, err := n.cfg.Listen("tcp", a)
		if err != nil {
			return &ConfigError{"http-tls", err.Error()}
		}
		n.httpTLSLn = connlimit.New(ln, n.cfg.MaxClients, "")
		// HTTP/2 (ALPN h2) and HTTP/1.1: http.Server.Serve hands a *tls.Conn that
		// negotiated h2 to net/http's own HTTP/2 server (its TLSNextProto, set up by
		// Serve as by ServeTLS), so a client that multiplexes needs one connection.
		n.httpTLS = tls.NewListener(n.httpTLSLn, n.tlsConfig([]string{"h2", "http/1.1"}))
	}
	return nil
}

// grpcTLSListener wraps ln for --grpc-tls: connections capped, then TLS with ALPN
// "h2", which gRPC clients require; the h2grpc server reads the decrypted stream.
func (n *Node) grpcTLSListener(ln net.Listener) net.Listener {
	return tls.NewListener(connlimit.New(ln, n.cfg.MaxClients, ""), n.tlsConfig([]string{"h2"}))
}

// serveTLS serves the RESP and HTTP TLS listeners (gRPC's is serveGRPC's).
func (n *Node) serveTLS() {
	if n.respTLSLn != nil {
		n.serving.Add(1)
		go func() {
			defer n.serving.Done()
			if err := n.resp.ServeTLS(n.respTLSLn, n.tlsConfig(nil), false); err != nil && !errors.Is(err, net.ErrClosed) {
				n.cfg.Logger.Debug("resp TLS server stopped", "err", err)
			}
		}()
	}
	if n.httpTLS != nil {
		n.serving.Add(1)
		go func() {
			defer n.serving.Done()
			if err := n.httpSrv.Serve(n.httpTLS); err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.cfg.Logger.Error("http TLS server stopped", "err", err)
			}
		}()
	}
}

// RESPTLSAddr is the address of --resp-tls ("" without it).
func (n *Node) RESPTLSAddr() string { return addrOf(n.respTLSLn) }

// HTTPTLSAddr is the address of --http-tls ("" without it).
func (n *Node) HTTPTLSAddr() string {
	if n.httpTLSLn == nil {
		return ""
	}
	return n.httpTLSLn.Addr().String()
}

// addrOf is ln's address, "" for a nil listener.
func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// httpHeaderTimeout is the HTTP server's ReadHeaderTimeout. net/http bounds a TLS
// handshake by its shortest timeout, this one, so with --http-tls it is no longer than
// the handshake timeout (both 10 s by default).
func (n *Node) httpHeaderTimeout() time.Duration {
	d := min(DefaultHTTPReadHeaderTimeout, n.cfg.HTTPReadTimeout)
	if n.cfg.HTTPTLSAddr != "" {
		d = min(d, n.cfg.TLSHandshakeTimeout)
	}
	return d
}
