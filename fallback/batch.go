package fallback

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/hashslot"
	"github.com/leapcount/leapcount/leaparray"
)

// Batch is write-behind that applies at most once: deltas cut into merge_many script
// calls, each numbered (its seq) by the store, so that sending a call again (its reply
// was lost; go-redis's Cluster client resent it) never applies it twice. Make one with
// NewBatch, send it with SendBatch until Confirmed. A Batch is not safe for concurrent
// use.
//
// A call applies only if its seq is above its writer's high-water mark in its hash slot
// (the key writerKey(tag, writer)), which it then raises, in the same script. This
// relies on the writer's order (see the package doc): a writer makes its batches
// (NewBatch) and sends them one at a time, in the order made, and sends a batch only
// once every earlier one is Confirmed.
type Batch struct {
	deltas  []Delta
	calls   []*batchCall
	dropped *FlushError // invalid deltas, reported by the next SendBatch
	// late are the deltas whose reset had a deadline (Delta.ResetBy) and is not known
	// to have applied: Redis found it past, or an earlier send applied its call.
	late []int
	// clock is Redis's clock (µs) as read by the earliest call the last send
	// had answered (0: none).
	clock int64
}

// callState is what is known of one call of a batch.
type callState uint8

const (
	unsent    callState = iota // certainly never run: not sent, or refused before running
	inDoubt                    // sent and not answered: it may have run
	confirmed                  // Redis answered: applied, now or by an earlier send
)

// batchCall is one merge_many call: KEYS[1] its writer key (call.keys[0]), then a
// counter per delta; ARGV the key's TTL, seq, the seq it waits for (set by each send)
// and the deltas. All of them are in call.cmd, ARGV from argsAt.
type batchCall struct {
	call
	seq    uint64
	owners []int // its deltas' indexes, in KEYS order after the writer key
	pairs  int   // (bucket, count) pairs in its ARGV
	argsAt int   // where ARGV starts in cmd
	state  callState
}

// argv is the call's ARGV, a view of its command.
func (c *batchCall) argv() []any { return c.cmd[c.argsAt:] }

// setCmd makes c's command from its deltas (owners, of deltas), keyOf giving a delta's
// counter key: the command is allocated once, at its size.
func (st *Store) setCmd(c *batchCall, deltas []Delta, keyOf func(i int) string) {
	args := 3
	for _, i := range c.owners {
		args += 4 + 2*len(deltas[i].Buckets)
	}
	cmd := make([]any, 0, 4+len(c.owners)+args)
	cmd = append(cmd, "evalsha", c.script.Hash(), 1+len(c.owners), c.keys[0])
	for _, i := range c.owners {
		cmd = append(cmd, keyOf(i))
	}
	c.argsAt = len(cmd)
	cmd = append(cmd, st.onceTTLMs(), c.seq, uint64(0))
	var boxes argBoxes
	for _, i := range c.owners {
		cmd = appendDeltaArgs(cmd, deltas[i], boxes.ttl(st, deltas[i].Spec), &boxes)
	}
	c.cmd = cmd
}

// errBehind is merge_many's answer to a call whose writer's earlier call of its slot
// (one sent before it and not yet confirmed) has not applied: the call did not run, so
// that it never raises the high-water mark over a call still to apply.
var errBehind = errors.New("an earlier call of this writer and slot has not applied yet")

// NewBatch cuts deltas into script calls, each with the next seq of the store. writer
// names the caller's write-behind: it must be unique per process run (a node name and a
// run ID, say) and used with one Store, whose seqs then grow across its batches (see
// Batch for the order a writer must keep).
//
// A call carries up to Config.FlushKeys deltas and flushPairs buckets, of counters of
// one hash slot in a Cluster; a counter's deltas all go in one call, in order (more than
// those bounds then), so that a reset is never overtaken by an older add of the same
// batch. Deltas without buckets and without Reset need no call. Invalid deltas (a bad
// Spec, a count past 2^63-1) get no call: the first SendBatch reports them.
func (st *Store) NewBatch(writer string, deltas []Delta) *Batch {
	b := &Batch{deltas: deltas, dropped: &FlushError{}}
	cs := st.groupDeltas(deltas, b.dropped)
	keys := make([]string, len(deltas))           // each delta's counter key
	filling := newPerSlot[*batchCall](st.cluster) // the call each slot is filling
	var slots []uint16                            // the slots of filling, in the order first seen
	for _, g := range cs.groups {
		c, seen := filling.get(g.slot)
		if c != nil && (len(c.owners)+g.n > st.cfg.FlushKeys || c.pairs+g.pairs > flushPairs) {
			b.calls = append(b.calls, c)
			c = nil
		}
		if c == nil {
			if !seen {
				slots = append(slots, g.slot)
			}
			left, _ := cs.left.get(g.slot)
			c = st.newCall(writer, g.slot, min(left, st.cfg.FlushKeys))
			filling.set(g.slot, c)
		}
		for i := g.first; i >= 0; i = cs.next[i] {
			keys[i] = g.ck
			c.owners = append(c.owners, int(i))
		}
		c.pairs += g.pairs
		left, _ := cs.left.get(g.slot)
		cs.left.set(g.slot, left-g.n)
	}
	for _, slot := range slots {
		c, _ := filling.get(slot)
		b.calls = append(b.calls, c)
	}
	for _, c := range b.calls {
		st.setCmd(c, deltas, func(i int) string { return keys[i] })
	}
	return b
}

// counterGroups is a batch's deltas grouped by counter, in the order each counter was
// first seen: a counter's deltas are chained through next (−1 ends a chain), so that
// the common group of one delta costs no slice of its own, and each call is made with
// room for the deltas it will take: a key flood's batches were most of the garbage the
// node made while they drained (BenchmarkNewBatch).
type counterGroups struct {
	groups []counterGroup
	next   []int32
	left   perSlot[int] // per slot, the deltas of its groups not yet in a call
}

type counterGroup struct {
	ck          string
	slot        uint16
	first, last int32 // its first and last delta
	n, pairs    int   // its deltas and their (bucket, count) pairs
}

// groupDeltas groups deltas by counter, leaving out (into dropped) the invalid ones and
// those with nothing to do.
func (st *Store) groupDeltas(deltas []Delta, dropped *FlushError) counterGroups {
	cs := counterGroups{groups: make([]counterGroup, 0, len(deltas)), next: make([]int32, len(deltas)),
		left: newPerSlot[int](st.cluster)}
	byKey := make(map[string]int, len(deltas))
	for i, d := range deltas {
		cs.next[i] = -1
		if err := checkDelta(d); err != nil {
			dropped.add(i, named(d, err))
			continue
		}
		if len(d.Buckets) == 0 && !d.Reset {
			continue // nothing to do: merging no buckets changes nothing
		}
		ck := counterKey(d.Key, d.Spec)
		g, ok := byKey[ck]
		if !ok {
			g = len(cs.groups)
			byKey[ck] = g
			var slot uint16
			if st.cluster {
				slot = hashslot.Of(ck)
			}
			cs.groups = append(cs.groups, counterGroup{ck: ck, slot: slot, first: int32(i), last: int32(i)})
		} else {
			cs.next[cs.groups[g].last] = int32(i)
			cs.groups[g].last = int32(i)
		}
		gr := &cs.groups[g]
		gr.n++
		gr.pairs += len(d.Buckets)
		left, _ := cs.left.get(gr.slot)
		cs.left.set(gr.slot, left+1)
	}
	return cs
}

// newCall starts a call of writer to slot with the store's next seq, with room for
// deltas deltas; setCmd makes its command once they are in. A writer's calls
// to one slot (to one server) come out of NewBatch in seq order, and so stay in every
// send: the writer key's high-water mark then only grows.
func (st *Store) newCall(writer string, slot uint16, deltas int) *batchCall {
	tag := oneServerTag
	if st.cluster {
		tag = slotTag(slot)
	}
	return &batchCall{seq: st.seq.Add(1), owners: make([]int, 0, deltas),
		call: call{script: scripts.mergeMany, keys: []string{writerKey(tag, writer)}}}
}

// SendBatch sends every call of b not yet confirmed, pipelined FlushChunk deltas (and at
// most flushPairs buckets) per round trip, and marks confirmed the calls Redis answered:
// applied now, or found applied before (their seq is not above the high-water mark). It
// returns nil when every call is confirmed. Else a *FlushError lists, by index into
// NewBatch's deltas, those of the calls left unconfirmed (errors wrapping
// counter.ErrUnavailable; ErrRedisDown for calls the open breaker refused) and those
// that can never apply (an invalid delta, a counter whose key holds another type):
// these are dropped, count as confirmed and are reported once. A call refused before it
// reached Redis stays unsent (see TakeUnsent); one sent and not answered is in doubt:
// only sending it again can tell, and applies it at most once, as long as it is sent
// again within Config.OnceTTL of the writer's last write to its slot (later the mark
// may be gone: see the package doc).
//
// Each call names the seq of the writer's call before it in its key that is not yet
// confirmed (its wait), and runs only once the mark has reached that: so a call that
// failed inside Redis as a whole (an OOM, a BUSY or LOADING server, a NOSCRIPT) stops
// the later calls of its key in the same send, which would otherwise raise the mark
// over it and make it be skipped as applied when sent again.
func (st *Store) SendBatch(ctx context.Context, b *Batch) error {
	fe := b.dropped
	b.dropped = &FlushError{}
	b.clock = 0
	var todo []*batchCall
	wait := map[string]uint64{} // per writer key, the last unconfirmed call's seq
	for _, c := range b.calls {
		if c.state != confirmed {
			c.argv()[2] = wait[c.keys[0]]
			wait[c.keys[0]] = c.seq
			todo = append(todo, c)
		}
	}
	for len(todo) > 0 {
		n, keys, pairs := 0, 0, 0
		for n < len(todo) && (n == 0 || keys+len(todo[n].owners) <= FlushChunk && pairs+todo[n].pairs <= flushPairs) {
			keys, pairs, n = keys+len(todo[n].owners), pairs+todo[n].pairs, n+1
		}
		trip := make([]call, n)
		for k := range trip {
			trip[k] = todo[k].call
		}
		cmds, tried := st.runAll(ctx, trip)
		for k, cmd := range cmds {
			st.settle(b, todo[k], cmd, tried, fe)
		}
		todo = todo[n:]
	}
	if len(fe.Failed) == 0 {
		return nil
	}
	fe.sort()
	return fe
}

// settle records what cmd, c's reply, says of c: confirmed when Redis answered it (per
// counter errors then go to fe as dropped deltas), else unsent or in doubt, its deltas in
// fe. tried says the call was handed to go-redis at all.
func (st *Store) settle(b *Batch, c *batchCall, cmd *redis.Cmd, tried bool, fe *FlushError) {
	r, err := mergeReply(cmd, len(c.owners))
	if err == nil {
		c.state = confirmed
		if r.clock > 0 && (b.clock == 0 || r.clock < b.clock) {
			b.clock = r.clock
		}
		for k, i := range c.owners {
			switch {
			case r.applied && r.errs[k] != nil:
				fe.add(i, named(b.deltas[i], r.errs[k]))
			case r.applied && r.late[k], !r.applied && pastDeadline(b.deltas[i], r.clock):
				b.late = append(b.late, i)
			}
		}
		return
	}
	if c.state == unsent && tried && (st.cluster || !neverSent(err)) {
		c.state = inDoubt
	}
	err = unavailable("flush", err) // one error per call, not per delta: an outage fails many
	for _, i := range c.owners {
		fe.add(i, err)
	}
}

// pastDeadline reports whether d's reset has a deadline that Redis's clock, at us, may
// have passed as the call applied (before us): a call found applied before ran no later.
func pastDeadline(d Delta, us int64) bool {
	return d.Reset && d.ResetBy > 0 && (us == 0 || us >= d.ResetBy)
}

// mergeResult is merge_many's reply for one call.
type mergeResult struct {
	applied bool    // this call applied it ({1, ...}), or found it applied before ({0, t})
	errs    []error // when applied, per counter nil or its error
	late    []bool  // when applied, per counter: its reset was past its deadline
	clock   int64   // Redis's clock as the call ran, µs
}

// mergeReply reads merge_many's reply for n counters; errBehind for {2}.
func mergeReply(cmd *redis.Cmd, n int) (mergeResult, error) {
	v, err := cmd.Slice()
	if err != nil {
		return mergeResult{}, err
	}
	if len(v) == 2 && v[0] == int64(0) {
		t, _ := v[1].(int64)
		return mergeResult{clock: t}, nil
	}
	if len(v) == 1 && v[0] == int64(2) {
		return mergeResult{}, errBehind
	}
	if len(v) != n+2 || v[0] != int64(1) {
		return mergeResult{}, fmt.Errorf("merge_many answered %d values for %d counters", len(v), n)
	}
	r := mergeResult{applied: true, errs: make([]error, n), late: make([]bool, n)}
	r.clock, _ = v[n+1].(int64)
	for k, x := range v[1 : n+1] {
		switch x {
		case int64(1):
		case int64(3):
			r.late[k] = true
		default:
			r.errs[k] = errors.New(fmt.Sprint(x))
		}
	}
	return r, nil
}

// neverSent reports whether a call that failed with err certainly did not run: no
// connection was had (the dial failed, the pool timed out, the client is closed), or
// Redis answered NOSCRIPT or errBehind. Only for a client that does not retry:
// go-redis's Cluster client sends a pipeline again after a timeout, so its last error
// does not tell whether an earlier attempt was written.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.Is(err, redis.ErrClosed) || isNoScript(err) || errors.Is(err, errBehind)
}

// Confirmed reports whether Redis confirmed every call of the batch.
func (b *Batch) Confirmed() bool {
	for _, c := range b.calls {
		if c.state != confirmed {
			return false
		}
	}
	return true
}

// InDoubt reports whether some unconfirmed call may have run: it was sent and not
// answered. Such deltas are not to be written any other way than by sending the batch
// again.
func (b *Batch) InDoubt() bool {
	for _, c := range b.calls {
		if c.state == inDoubt {
			return true
		}
	}
	return false
}

// TakeUnsent removes from the batch the calls that certainly never ran and returns
// their deltas, in the order given to NewBatch: the caller may write them another way
// (hand them to another node). A counter's deltas share a call, so they go together.
func (b *Batch) TakeUnsent() []Delta {
	var idx []int
	kept := b.calls[:0]
	for _, c := range b.calls {
		if c.state == unsent {
			idx = append(idx, c.owners...)
		} else {
			kept = append(kept, c)
		}
	}
	clear(b.calls[len(kept):])
	b.calls = kept
	slices.Sort(idx)
	out := make([]Delta, len(idx))
	for k, i := range idx {
		out[k] = b.deltas[i]
	}
	return out
}

// Refs lists, once each, the counters that still have deltas in unconfirmed calls.
func (b *Batch) Refs() []CounterRef {
	var out []CounterRef
	seen := map[CounterRef]bool{}
	for _, c := range b.calls {
		if c.state == confirmed {
			continue
		}
		for _, i := range c.owners {
			r := CounterRef{Key: b.deltas[i].Key, Spec: b.deltas[i].Spec}
			if !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
	}
	return out
}

// named wraps a delta's own failure with the counter's name.
func named(d Delta, err error) error {
	return fmt.Errorf("counter %q (%dms/%d): %w", d.Key, d.Spec.WindowMs, d.Spec.Buckets, err)
}

// appendDelta appends merge_many's arguments for one delta: reset, B, TTL, the number of
// pairs and the pairs.
func (st *Store) appendDelta(args []any, d Delta) []any {
	return appendDeltaArgs(args, d, st.ttlMs(d.Spec), nil)
}

func appendDeltaArgs(args []any, d Delta, ttl any, boxes *argBoxes) []any {
	args = append(args, resetArg(d), d.Spec.Buckets, ttl, len(d.Buckets))
	for _, b := range d.Buckets {
		args = append(args, boxes.index(b.Index), b.Count) // (go-redis writes a count in decimal; one below 256 boxes for free)
	}
	return args
}

// resetArg is merge_many's reset argument for d: 0, 1, or its deadline (negative for a
// Base, skipped whole when late).
func resetArg(d Delta) int64 {
	switch {
	case !d.Reset:
		return 0
	case d.ResetBy <= 1:
		return 1
	case d.Base:
		return -d.ResetBy
	}
	return d.ResetBy
}

// argBoxes boxes once the arguments a call's deltas repeat: the TTL of the last Spec
// asked for (a call's counters mostly share a Spec) and the last bucket index (a key
// flood's share its bucket). Boxing each for each delta cost an allocation per counter
// (BenchmarkNewBatch: allocs/delta). A nil *argBoxes boxes each index anew.
type argBoxes struct {
	sp           leaparray.Spec
	ttlBox       any
	lastIndex    int64
	lastIndexBox any
}

func (a *argBoxes) ttl(st *Store, sp leaparray.Spec) any {
	if a.ttlBox == nil || a.sp != sp {
		a.sp, a.ttlBox = sp, st.ttlMs(sp)
	}
	return a.ttlBox
}

func (a *argBoxes) index(j int64) any {
	if a == nil {
		return j
	}
	if a.lastIndexBox == nil || a.lastIndex != j {
		a.lastIndex, a.lastIndexBox = j, j
	}
	return a.lastIndexBox
}

// checkDelta checks what merging a delta needs: a valid shape and counts that fit in a
// Redis integer.
func checkDelta(d Delta) error {
	if err := checkSpec(d.Spec); err != nil {
		return err
	}
	for _, b := range d.Buckets {
		if b.Count > 1<<63-1 {
			return fmt.Errorf("%w: bucket %d count %d does not fit in a Redis integer", counter.ErrBadArgument, b.Index, b.Count)
		}
	}
	return nil
}
