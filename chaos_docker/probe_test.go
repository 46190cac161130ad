//go:build chaos

package chaosdocker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/internal/testkit/faultload"
	"github.com/leapcount/leapcount/internal/testkit/history"
)

// probes are increments a scenario sends itself, to put chosen counters in chosen
// states (the load picks its keys at random); they are recorded and checked as the
// load's are, with nothing allowed lost.
type probes struct {
	log  history.Log
	keys []string
}

// probe sends SW.INCR key through node and records what it was told.
func (r *run) probe(node, key string) {
	cl := redis.NewClient(&redis.Options{Addr: r.c.respAddr(node), Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := cl.Do(ctx, "SW.INCR", key, r.incrs.Window()).Err()
	r.probes.log.Incr(key, 1, faultload.OutcomeOf(err))
	if !slices.Contains(r.probes.keys, key) {
		r.probes.keys = append(r.probes.keys, key)
	}
}

// pairOn picks two counters of one partition (one hash tag) that node owns.
func (r *run) pairOn(node string) (string, string) {
	for i := range 100 {
		tag := fmt.Sprintf("{pair:%s:%d}", r.name, i)
		if len(r.c.ownedBy(node, []string{tag})) == 1 {
			return tag + ":a", tag + ":b"
		}
	}
	r.t.Fatalf("%s owns none of 100 hash tags", node)
	return "", ""
}

// checkProbes checks the probed counters through node.
func (r *run) checkProbes(ctx context.Context, node string, counter faultload.Counter) {
	if len(r.probes.keys) == 0 {
		return
	}
	counts, err := counter.Counts(ctx, r.probes.keys, r.incrs.Window())
	if err != nil {
		r.t.Fatalf("probe counts through %s: %v", node, err)
	}
	s := r.probes.log.Check(finalCounts(r.probes.keys, counts), history.Bounds{})
	r.t.Logf("%s: probes through %s: %v", r.name, node, s)
	if len(s.Violations) > 0 {
		r.t.Errorf("%s, probe counts through %s: %v: %q", r.name, node, s, s.Violations)
	}
}
