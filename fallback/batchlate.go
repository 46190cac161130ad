package fallback

// Resets with a deadline (Delta.ResetBy): what a send tells their writer.

// LateResets returns the deltas of confirmed calls whose reset had a deadline and is
// not known to have applied: Redis found the deadline past (it merged the buckets
// alone, or skipped a Base), or the call was found applied by an earlier send, which
// may have come late. Each is returned once. A writer that still holds the counter
// writes its memory back in full: Redis may lack the reset that memory holds.
func (b *Batch) LateResets() []Delta {
	out := make([]Delta, len(b.late))
	for k, i := range b.late {
		out[k] = b.deltas[i]
	}
	b.late = b.late[:0]
	return out
}

// RedisTime is Redis's clock (µs since the Unix epoch) as the earliest call the last
// SendBatch had answered read it, or 0 when none was. Redis read it before the send
// returned: at any later instant Redis's clock is at least this, which is what a
// writer needs to set a deadline Redis will not find past too early (Delta.ResetBy).
// In a Cluster, it is the earliest of the masters the send reached.
func (b *Batch) RedisTime() int64 { return b.clock }
