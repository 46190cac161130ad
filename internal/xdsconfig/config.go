package xdsconfig

import (
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/leapcount/leapcount/internal/backoff"
	"github.com/leapcount/leapcount/limits"
)

// Config is where and how to subscribe; zero fields take envoyproxy/ratelimit's
// defaults.
type Config struct {
	// Server is the management server's gRPC target (CONFIG_GRPC_XDS_SERVER_URL;
	// default "localhost:18000"): host:port, or any target grpc-go resolves.
	Server string
	// NodeID and NodeMetadata name this node to the server (its snapshots are
	// keyed by node ID; default "default"). Metadata values are sent as strings.
	NodeID       string
	NodeMetadata map[string]string
	// Headers are sent as gRPC metadata on each stream (keys lower case).
	Headers map[string]string
	// TLS, when set, is the connection's TLS (nil: plaintext).
	TLS *tls.Config
	// ConnectRetry is the wait between attempts to connect while the server cannot
	// be reached, ±50% (default 3s).
	ConnectRetry time.Duration
	// Backoff is the wait before a stream after the one before ended, from
	// Backoff.Initial (default 10s) up to Backoff.Max (default 60s); it starts again at
	// Initial after a stream that got a response.
	Backoff backoff.Policy
	// Jitter draws each wait at random from Initial up to the larger of the backoff's
	// wait and 1.5×Initial (at most Max), so that nodes that lost the server together
	// do not come back together.
	Jitter bool
	// MaxMessageBytes bounds a response (0: gRPC's 4 MiB).
	MaxMessageBytes int
	// Reloaded, when set, is told of each response's outcome: nil when its config
	// was put in force (ACK), else why it was refused (NACK).
	Reloaded func(error)
	Logger   *slog.Logger
}

// Apply builds the rules of files and puts them in force, or refuses them with an
// error (the rules in force stay, and the response is NACKed with the error). files
// are the resources of one response, in its order.
type Apply func(files []*limits.File) error

// TypeURL is the resource type subscribed to.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

func (c Config) withDefaults() Config {
	if c.Server == "" {
		c.Server = "localhost:18000"
	}
	if c.NodeID == "" {
		c.NodeID = "default"
	}
	if c.ConnectRetry <= 0 {
		c.ConnectRetry = 3 * time.Second
	}
	if c.Backoff.Initial <= 0 {
		c.Backoff.Initial = 10 * time.Second
	}
	if c.Backoff.Max <= 0 {
		c.Backoff.Max = 60 * time.Second
	}
	c.Backoff.Max = max(c.Backoff.Max, c.Backoff.Initial)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}
