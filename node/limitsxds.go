package node

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leapcount/leapcount/internal/xdsconfig"
	"github.com/leapcount/leapcount/limits"
)

// The rules from an xDS management server (Config.LimitsXDS): package xdsconfig
// subscribes, and each config it receives is built and checked as a reload of
// --limits is, then put in force; one refused is NACKed and the rules in force stay.

// runLimitsXDS takes the rules from xDS until the node stops.
func (n *Node) runLimitsXDS(reloads *prometheus.CounterVec) {
	defer n.loops.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	cfg := *n.cfg.LimitsXDS
	if cfg.Logger == nil {
		cfg.Logger = n.cfg.Logger
	}
	cfg.Reloaded = func(err error) {
		result := "ok"
		if err != nil {
			result = "error"
		}
		reloads.WithLabelValues(result).Inc()
	}
	if err := xdsconfig.Run(ctx, cfg, n.applyXDS); err != nil {
		n.cfg.Logger.Error("rate limit config from xDS not subscribed to: no rules will be in force", "server", cfg.Server, "err", err)
	}
}

// applyXDS puts a config from xDS in force (an xdsconfig.Apply): its files built
// (merged with --limits-merge) and checked as --limits's are; an error leaves the
// rules in force.
func (n *Node) applyXDS(files []*limits.File) error {
	rules, err := n.checkRules(limits.Build(files, n.cfg.LimitsMerge))
	if err != nil {
		return err
	}
	n.limits.Store(&limitsState{rules: rules})
	return nil
}
