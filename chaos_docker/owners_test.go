//go:build chaos

package chaosdocker

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/hashslot"
)

// ownedBy is the set of keys whose owner is node now, by the slot map a member's
// CLUSTER SLOTS gives (each range named by its owner's advertised cluster port).
func (c *cluster) ownedBy(node string, keys []string) map[string]bool {
	c.t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: c.respAddr(c.members[0]), Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	slots, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		c.t.Fatalf("CLUSTER SLOTS through %s: %v", c.members[0], err)
	}
	mine := make([]bool, 1<<14)
	covered := 0
	for _, s := range slots {
		covered += s.End - s.Start + 1
		if len(s.Nodes) > 0 && s.Nodes[0].Addr == c.addr(node, 7380) {
			for i := s.Start; i <= s.End; i++ {
				mine[i] = true
			}
		}
	}
	if covered != 1<<14 {
		c.t.Fatalf("CLUSTER SLOTS through %s covers %d slots; want all 16384", c.members[0], covered)
	}
	out := map[string]bool{}
	for _, k := range keys {
		if mine[hashslot.Of(k)] {
			out[k] = true
		}
	}
	return out
}
