package node

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leapcount/leapcount/internal/connlimit"
	"github.com/leapcount/leapcount/limits"
	"github.com/leapcount/leapcount/rlqs"
	"github.com/leapcount/leapcount/rlsapi"
)

// The gRPC front end (--grpc): Envoy's rate limit service over the rules of --limits,
// read again whenever its files change (reloadLimits), or of an xDS management server
// (runLimitsXDS).

// limitsState is the rules in force and what they were read from.
type limitsState struct {
	rules       *limits.Rules
	fingerprint [32]byte
}

// loadLimits reads --limits; a bad config is an error naming its file and line.
func (n *Node) loadLimits() (*limitsState, error) {
	fp, err := limitsFingerprint(n.cfg.Limits)
	if err != nil {
		return nil, err
	}
	rules, _, err := limits.LoadPath(n.cfg.Limits, n.cfg.LimitsMerge)
	if rules, err = n.checkRules(rules, err); err != nil {
		return nil, err
	}
	return &limitsState{rules: rules, fingerprint: fp}, nil
}

// checkRules passes the rules built (or the error of building them) only if the gRPC
// front end can serve them: every rule set is checked so before it is put in force,
// from --limits or from xDS.
func (n *Node) checkRules(rules *limits.Rules, err error) (*limits.Rules, error) {
	if err == nil {
		err = rlsapi.Check(rules, n.cfg.LimitsBuckets)
	}
	if err != nil {
		return nil, err
	}
	return rules, nil
}

// limitsFingerprint hashes the names and contents of the config files at path (links
// followed): an edit in place, a file replaced by a rename, or a linked directory
// swapped (a Kubernetes ConfigMap) each change it.
func limitsFingerprint(path string) ([32]byte, error) {
	h := sha256.New()
	names := []string{path}
	if st, err := os.Stat(path); err != nil {
		return [32]byte{}, err
	} else if st.IsDir() {
		matches, _ := filepath.Glob(filepath.Join(path, "*.y*ml"))
		names = matches
	}
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			continue // gone meanwhile: the next look sees the new set
		}
		io.WriteString(h, name+"\x00")
		_, err = io.Copy(h, io.LimitReader(f, maxLimitsFile))
		f.Close()
		if err != nil {
			return [32]byte{}, err
		}
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out, nil
}

// maxLimitsFile bounds what a config file is read for its fingerprint.
const maxLimitsFile = 16 << 20

// limitsPoll is how often --limits is looked at for changes.
const limitsPoll = time.Second

// reloadLimits reloads --limits if its files changed; a bad one is logged and counted,
// and the rules in force stay.
func (n *Node) reloadLimits(reloads *prometheus.CounterVec) {
	cur := n.limits.Load()
	fp, err := limitsFingerprint(n.cfg.Limits)
	if err == nil && fp == cur.fingerprint {
		return
	}
	next, err := n.loadLimits()
	if err != nil {
		reloads.WithLabelValues("error").Inc()
		n.cfg.Logger.Error("rate limit config not reloaded: the rules in force stay", "path", n.cfg.Limits, "err", err)
		n.limits.Store(&limitsState{rules: cur.rules, fingerprint: fp}) // not again until it changes
		return
	}
	n.limits.Store(next)
	reloads.WithLabelValues("ok").Inc()
	n.cfg.Logger.Info("rate limit config reloaded", "path", n.cfg.Limits, "domains", len(next.rules.Domains()))
}

// listenGRPC starts the gRPC front end when --grpc or --grpc-tls is set.
func (n *Node) listenGRPC() error {
	if n.cfg.GRPCAddr == "" && n.cfg.GRPCTLSAddr == "" {
		return nil
	}
	if n.cfg.Limits != "" {
		st, err := n.loadLimits()
		if err != nil {
			return &ConfigError{"limits", err.Error()}
		}
		n.limits.Store(st)
	} else if n.cfg.LimitsXDS != nil {
		n.cfg.Logger.Info("rate limit rules from xDS: gRPC health answers NOT_SERVING and every ShouldRateLimit UNAVAILABLE until the first config is in force", "server", n.cfg.LimitsXDS.Server)
	} else {
		n.cfg.Logger.Warn("--grpc without --limits: gRPC health answers NOT_SERVING and every ShouldRateLimit UNAVAILABLE (Envoy with failure_mode_deny denies them all)")
	}
	quota, err := rlqs.New(rlqs.Config{Decider: n.router, Rules: n.rules, Sharer: quotaSharer{n}, Name: n.cfg.Name, TTL: n.cfg.RLQSTTL, Delivery: n.cfg.RLQSDelivery,
		DefaultBuckets: n.cfg.LimitsBuckets, MaxKeyBytes: n.cfg.MaxKeyBytes, Registerer: n.reg, Logger: n.cfg.Logger})
	if err != nil {
		return err
	}
	srv, err := rlsapi.New(rlsapi.Config{Decider: n.router, Rules: n.rules, Token: n.cfg.Token, AuthLimiter: n.authLimiter,
		ResponseHeaders: n.cfg.RLSHeaders, DeniedConsumesNothing: n.cfg.RLSDeniedConsumesNothing, DefaultBuckets: n.cfg.LimitsBuckets, MaxKeyBytes: n.cfg.MaxKeyBytes, Ready: n.grpcReady, Registerer: n.reg, Logger: n.cfg.Logger,
		HandshakeTimeout: n.cfg.TLSHandshakeTimeout, RequestTimeout: n.cfg.GRPCRequestTimeout,
		Services: []rlsapi.Service{{Name: rlqs.ServiceName, Register: quota.Register, Streams: []string{rlqs.StreamMethod}}}})
	if err != nil {
		return err
	}
	n.grpc = srv
	if a := n.cfg.GRPCAddr; a != "" {
		ln, err := n.cfg.Listen("tcp", a)
		if err != nil {
			return &ConfigError{"grpc", err.Error()}
		}
		n.grpcLn = connlimit.New(ln, n.cfg.MaxClients, "")
	}
	if a := n.cfg.GRPCTLSAddr; a != "" {
		ln, err := n.cfg.Listen("tcp", a)
		if err != nil {
			return &ConfigError{"grpc-tls", err.Error()}
		}
		n.grpcTLSLn = n.grpcTLSListener(ln)
	}
	return nil
}

// grpcReady is the gRPC front end's health: SERVING while the node is ready and rules
// with at least one domain are loaded, as envoyproxy/ratelimit's health is with
// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED. Without rules every call is answered
// UNAVAILABLE: a health check that said SERVING would send Envoy to a service that
// decides nothing.
func (n *Node) grpcReady() bool {
	rs := n.rules()
	return n.Ready() && rs != nil && len(rs.Domains()) > 0
}

// rules is the rules in force (nil: none loaded).
func (n *Node) rules() *limits.Rules {
	if st := n.limits.Load(); st != nil {
		return st.rules
	}
	return nil
}

// serveGRPC runs the gRPC front end and the config's reloads.
func (n *Node) serveGRPC() {
	if n.grpc == nil {
		return
	}
	for _, ln := range []net.Listener{n.grpcLn, n.grpcTLSLn} {
		if ln == nil {
			continue
		}
		n.serving.Add(1)
		go func() {
			defer n.serving.Done()
			if err := n.grpc.Serve(ln); err != nil && !errors.Is(err, context.Canceled) {
				n.cfg.Logger.Debug("grpc server stopped", "err", err, "addr", ln.Addr().String())
			}
		}()
	}
	if n.cfg.Limits != "" || n.cfg.LimitsXDS != nil {
		reloads := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leapcount_rls_config_reloads_total",
			Help: "Reloads of the rate limit rules (--limits after its files changed, or a config from xDS), by result (ok, error: the rules in force stayed)."}, []string{"result"})
		n.reg.MustRegister(reloads)
		if n.cfg.LimitsXDS != nil {
			n.loops.Add(1)
			go n.runLimitsXDS(reloads)
		} else {
			n.every(limitsPoll, func() { n.reloadLimits(reloads) })
		}
	}
}

// GRPCAddr is the address the gRPC front end listens on ("" without --grpc).
func (n *Node) GRPCAddr() string { return addrOf(n.grpcLn) }

// GRPCTLSAddr is the address of --grpc-tls ("" without it).
func (n *Node) GRPCTLSAddr() string { return addrOf(n.grpcTLSLn) }
