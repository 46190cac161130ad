package fallback

// What a writer changes in a batch not yet confirmed: the calls' deltas read back,
// rewritten or dropped, each call keeping its seq.

// Unconfirmed returns the deltas of the calls Redis has not confirmed.
func (b *Batch) Unconfirmed() []Delta {
	var out []Delta
	for _, c := range b.calls {
		if c.state == confirmed {
			continue
		}
		for _, i := range c.owners {
			out = append(out, b.deltas[i])
		}
	}
	return out
}

// Rewrite replaces each delta d of b's unconfirmed calls with fn(d), or drops it when
// fn says not to keep it, and reports how many it changed. Each call keeps its seq:
// sent again, it still applies at most once, in its first form or its rewritten one,
// whichever of its sends applies. A call left with no delta counts as confirmed. A
// writer whose right to a counter ended before its reset reached Redis rewrites it
// without the reset: applied late, it would erase what the counter's next owner wrote
// meanwhile.
func (st *Store) Rewrite(b *Batch, fn func(Delta) (Delta, bool)) int {
	return st.rewrite(b, func(c *batchCall) bool { return c.state != confirmed }, fn)
}

// DropInDoubt drops the deltas of b's calls in doubt (sent, not answered) that drop
// names, and reports how many. A writer drops what it must not send again although it
// may not have applied: once Redis lost its data, the record that makes a call apply
// once is gone, and another node may hold those counts already.
func (st *Store) DropInDoubt(b *Batch, drop func(Delta) bool) int {
	return st.rewrite(b, func(c *batchCall) bool { return c.state == inDoubt },
		func(d Delta) (Delta, bool) { return d, !drop(d) })
}

// rewrite is Rewrite over the calls of b that match.
func (st *Store) rewrite(b *Batch, match func(*batchCall) bool, fn func(Delta) (Delta, bool)) int {
	n := 0
	for _, c := range b.calls {
		if !match(c) {
			continue
		}
		changed := false
		kept := c.owners[:0]
		for _, i := range c.owners {
			d, keep := fn(b.deltas[i])
			if !keep || d.Reset != b.deltas[i].Reset || d.ResetBy != b.deltas[i].ResetBy || len(d.Buckets) != len(b.deltas[i].Buckets) {
				changed = true
				n++
			}
			b.deltas[i] = d
			if keep {
				kept = append(kept, i)
			}
		}
		if !changed {
			continue
		}
		c.owners, c.pairs = kept, 0
		for _, i := range c.owners {
			c.pairs += len(b.deltas[i].Buckets)
		}
		st.setCmd(c, b.deltas, func(i int) string { return counterKey(b.deltas[i].Key, b.deltas[i].Spec) })
		if len(c.owners) == 0 {
			c.state = confirmed
		}
	}
	return n
}
