package fallback

import (
	"context"
	"errors"
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
// for Config.OnceTTL) reads as not reached. With Config.WaitReplicas a mark counts only
// once that many replicas hold it: a call applied on a master that then fails over to
// a replica without it did not apply, and its writer sends it again.
func (st *Store) Reached(ctx context.Context, fs []Fence) (bool, error) {
	for _, f := range fs {
		mark, err := st.mark(ctx, f.WriterKey)
		if errors.Is(err, ErrNotReplicated) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if mark < f.Seq {
			return false, nil
		}
	}
	return true, nil
}

// mark reads a writer's mark (0 when gone), confirmed on Config.WaitReplicas replicas
// when it asks for them.
func (st *Store) mark(ctx context.Context, writerKey string) (uint64, error) {
	v, err := st.runDurable(ctx, call{script: scripts.mark, keys: []string{writerKey}, args: []any{st.cfg.OnceTTL.Milliseconds()}}).Int64()
	if err != nil && !errors.Is(err, ErrNotReplicated) {
		err = unavailable("fence", err)
	}
	return uint64(max(v, 0)), err
}
