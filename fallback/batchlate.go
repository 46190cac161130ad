package fallback

import (
	"slices"

	"github.com/leapcount/leapcount/leaparray"
)

// Resets with a deadline (Delta.ResetBy): what a send tells their writer.

// LateResets returns, per counter of b whose last reset in b had a deadline and is not
// known to have applied, what to send again as its whole state (LateStates): Redis found
// the deadline past (it merged the buckets alone, or skipped a Base), or the call was
// found applied by an earlier send while Redis's clock was past the deadline already
// (that send may have run late). Each is returned once. A writer that still holds the
// counter sends it again: Redis may lack the reset that memory holds.
func (b *Batch) LateResets() []Delta {
	if len(b.late) == 0 {
		return nil
	}
	late := map[int]bool{}
	for _, i := range b.late {
		late[i] = true
	}
	b.late = b.late[:0]
	var out []Delta
	for _, c := range b.calls {
		if !slices.ContainsFunc(c.owners, func(i int) bool { return late[i] }) {
			continue
		}
		ds := make([]Delta, len(c.owners))
		for k, i := range c.owners {
			ds[k] = b.deltas[i]
		}
		out = append(out, LateStates(ds, func(k int) bool { return late[c.owners[k]] })...)
	}
	return out
}

// LateStates is, for each counter of ds (in order; a counter's deltas all among them)
// whose last reset is late (late(i) says of ds[i]), that reset's delta with the
// buckets of every later delta of the counter added: all the counter held since the
// reset, when ds were made. Sent again with its reset (as a Base: it is a whole state),
// it makes Redis hold that whatever the late one did. A counter whose last reset applied
// in time needs nothing: it erased what any late one left.
func LateStates(ds []Delta, late func(i int) bool) []Delta {
	at := map[CounterRef]int{} // the counter's state in out, while its last reset is late
	var out []Delta
	for i, d := range ds {
		r := CounterRef{Key: d.Key, Spec: d.Spec}
		k, open := at[r]
		switch {
		case late(i):
			s := d
			s.Buckets, s.ResetBy, s.Base = slices.Clone(d.Buckets), 0, true
			if open {
				out[k] = s
			} else {
				at[r] = len(out)
				out = append(out, s)
			}
		case !open:
		case d.Reset:
			out[k].Key = "" // a reset in time after it erased what it left
			delete(at, r)
		default:
			out[k].Buckets = AddBuckets(out[k].Buckets, d.Buckets)
		}
	}
	return slices.DeleteFunc(out, func(d Delta) bool { return d.Key == "" })
}

// AddBuckets adds src's counts to dst's, bucket by bucket, and returns dst.
func AddBuckets(dst, src []leaparray.Bucket) []leaparray.Bucket {
next:
	for _, b := range src {
		for i := range dst {
			if dst[i].Index == b.Index {
				dst[i].Count += b.Count
				continue next
			}
		}
		dst = append(dst, b)
	}
	return dst
}

// RedisTime is Redis's clock (µs since the Unix epoch) as the earliest call the last
// SendBatch had answered read it, or 0 when none was. Redis read it before the send
// returned: at any later instant Redis's clock is at least this, which is what a
// writer needs to set a deadline Redis will not find past too early (Delta.ResetBy).
// In a Cluster, it is the earliest of the masters the send reached.
func (b *Batch) RedisTime() int64 { return b.clock }
