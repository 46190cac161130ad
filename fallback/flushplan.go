package fallback

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/redis/go-redis/v9"
)

// flushCall is one script call of a flush and the deltas it carries.
type flushCall struct {
	call
	owners []int // indexes of its deltas, in KEYS order
	pairs  int   // (bucket, count) pairs in its ARGV
}

// planFlush turns deltas into script calls: a merge.lua call for each delta with a
// BatchID, and merge_many.lua calls of up to Config.FlushKeys counters and flushPairs
// pairs for the others, grouped by hash slot in a Cluster (any grouping will do on one
// server). Deltas that are invalid go to fe; empty ones need no call.
func (st *Store) planFlush(deltas []Delta, fe *FlushError) []flushCall {
	var out []flushCall
	filling := map[uint16]*flushCall{} // per slot (all slot 0 when not a Cluster)
	var slots []uint16                 // the slots of filling, in the order first seen
	for i, d := range deltas {
		if err := checkDelta(d); err != nil {
			fe.add(i, d, err)
			continue
		}
		if d.BatchID != "" {
			c, _, _ := st.mergeCall(d.Key, d.Spec, d.BatchID, d.Buckets)
			out = append(out, flushCall{call: c, owners: []int{i}, pairs: len(d.Buckets)})
			continue
		}
		if len(d.Buckets) == 0 {
			continue // nothing to add, as Merge does nothing
		}
		ck := counterKey(d.Key, d.Spec)
		var slot uint16
		if st.cluster {
			slot = slotOf(ck)
		}
		fc := filling[slot]
		if fc != nil && (len(fc.owners) == st.cfg.FlushKeys || fc.pairs+len(d.Buckets) > flushPairs) {
			out = append(out, *fc)
			fc = nil
		}
		if fc == nil {
			if _, seen := filling[slot]; !seen {
				slots = append(slots, slot)
			}
			fc = &flushCall{call: call{script: scripts.mergeMany}}
			filling[slot] = fc
		}
		fc.keys = append(fc.keys, ck)
		fc.args = append(fc.args, d.Spec.Buckets, st.ttlMs(d.Spec), len(d.Buckets))
		for _, b := range d.Buckets {
			fc.args = append(fc.args, b.Index, strconv.FormatUint(b.Count, 10))
		}
		fc.owners = append(fc.owners, i)
		fc.pairs += len(d.Buckets)
	}
	for _, slot := range slots {
		if fc := filling[slot]; len(fc.owners) > 0 {
			out = append(out, *fc)
		}
	}
	return out
}

// checkDelta checks what merging a delta needs: a valid shape and counts that fit in a
// Redis integer.
func checkDelta(d Delta) error {
	if err := checkSpec(d.Spec); err != nil {
		return err
	}
	return checkCounts(d.Buckets)
}

func checkCounts(buckets []leaparray.Bucket) error {
	for _, b := range buckets {
		if b.Count > math.MaxInt64 {
			return fmt.Errorf("%w: bucket %d count %d does not fit in a Redis integer", counter.ErrBadArgument, b.Index, b.Count)
		}
	}
	return nil
}

// settle records in fe the deltas of c that its reply says were not applied: all of
// them when the call failed, else those whose key merge_many.lua answered with an error.
func (c *flushCall) settle(cmd *redis.Cmd, deltas []Delta, fe *FlushError) {
	fail := func(i int, err error) { fe.add(i, deltas[i], unavailable("flush", err)) }
	if err := cmd.Err(); err != nil {
		for _, i := range c.owners {
			fail(i, err)
		}
		return
	}
	if c.script != scripts.mergeMany {
		return
	}
	replies, err := cmd.Slice()
	if err == nil && len(replies) != len(c.owners) {
		err = fmt.Errorf("merge_many answered %d replies for %d keys", len(replies), len(c.owners))
	}
	for k, i := range c.owners {
		switch {
		case err != nil:
			fail(i, err)
		case replies[k] != int64(1):
			fail(i, errors.New(fmt.Sprint(replies[k])))
		}
	}
}
