package fallback

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Fence is a writer's call that was sent and not answered (in doubt): it may have run
// in Redis, or may still run when its writer sends it again. A node that takes over
// counters with such a call behind them (handed over directly while Redis was down)
// holds their counts in memory, and must not read them back from Redis until the call
// has applied: Reached tells. Calls of a writer key apply in seq order, so its mark at
// Seq or above means this call, and every earlier one, applied.
type Fence struct {
	WriterKey string
	Seq       uint64
}

// Fences returns the fences of b's calls in doubt that carry a delta match accepts,
// one per writer key (the highest seq).
func (b *Batch) Fences(match func(Delta) bool) []Fence {
	top := map[string]uint64{}
	for _, c := range b.calls {
		if c.state != inDoubt {
			continue
		}
		for _, i := range c.owners {
			if match(b.deltas[i]) {
				top[c.keys[0]] = max(top[c.keys[0]], c.seq)
				break
			}
		}
	}
	out := make([]Fence, 0, len(top))
	for k, seq := range top {
		out = append(out, Fence{WriterKey: k, Seq: seq})
	}
	return out
}

// Reached reports whether every fence's call has applied: its writer's mark in Redis
// is at its seq or above. A mark that is gone (its writer wrote nothing to that slot
// for Config.OnceTTL) reads as not reached.
func (st *Store) Reached(ctx context.Context, fs []Fence) (bool, error) {
	for _, f := range fs {
		var v string
		err := st.guard(ctx, func() error {
			var err error
			v, err = st.rdb.Get(ctx, f.WriterKey).Result()
			if errors.Is(err, redis.Nil) {
				v, err = "0", nil
			}
			return err
		})
		if err != nil {
			return false, err
		}
		if mark, _ := strconv.ParseUint(v, 10, 64); mark < f.Seq {
			return false, nil
		}
	}
	return true, nil
}
