package xdsconfig

import (
	"context"
	"math/rand/v2"
	"time"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"
)

// client is one Run's state.
type client struct {
	cfg     Config
	apply   Apply
	node    *corepb.Node
	headers metadata.MD
	version string   // the version in force ("": none yet)
	refused *refusal // the last config refused, until one is taken
}

// Run subscribes to the rate limit config at cfg.Server and hands each response to
// apply, until ctx ends; it returns nil then, or at once the error that keeps it from
// starting (a target grpc-go cannot parse).
func Run(ctx context.Context, cfg Config, apply Apply) error {
	cfg = cfg.withDefaults()
	conn, err := grpc.NewClient(cfg.Server, transport(cfg), grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: grpcbackoff.Config{BaseDelay: cfg.ConnectRetry, Multiplier: 1, Jitter: 0.5, MaxDelay: cfg.ConnectRetry},
		// as grpc-go's default: a connection attempt may take this long
		MinConnectTimeout: 20 * time.Second,
	}))
	if err != nil {
		return err
	}
	defer conn.Close()
	c := &client{cfg: cfg, apply: apply, node: nodeOf(cfg), headers: metadata.New(cfg.Headers)}
	var wait time.Duration
	for {
		answered, err := c.session(ctx, conn)
		if ctx.Err() != nil {
			return nil
		}
		if answered {
			wait = 0
		}
		wait = cfg.Backoff.Next(wait)
		d := c.jittered(wait)
		cfg.Logger.Warn("xDS stream for the rate limit config ended: the rules in force stay; opening another", "server", cfg.Server, "err", err, "in", d.String())
		if !sleep(ctx, d) {
			return nil
		}
	}
}

// sleep waits d, or until ctx ends: then it reports false.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// jittered is the wait before the next stream, after the backoff's wait d: d, or with
// Config.Jitter, a wait drawn uniformly from Initial up to the larger of d and
// 1.5×Initial, at most Max.
func (c *client) jittered(d time.Duration) time.Duration {
	if !c.cfg.Jitter {
		return d
	}
	lo := c.cfg.Backoff.Initial
	hi := min(max(d, lo+lo/2), c.cfg.Backoff.Max)
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo+1)
}

func transport(cfg Config) grpc.DialOption {
	if cfg.TLS == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg.TLS))
}

// nodeOf is the node named in the first request of each stream.
func nodeOf(cfg Config) *corepb.Node {
	fields := make(map[string]*structpb.Value, len(cfg.NodeMetadata))
	for k, v := range cfg.NodeMetadata {
		fields[k] = structpb.NewStringValue(v)
	}
	return &corepb.Node{Id: cfg.NodeID, Metadata: &structpb.Struct{Fields: fields}}
}
