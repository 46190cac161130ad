package sim

import (
	"maps"
	"slices"
	"time"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/ownerprobe"
	"github.com/leapcount/leapcount/owner"
)

// What a loss of Redis's data may lose, per counter, as the faults table of docs/guarantees.md says
// ("Redis emptied"), and no more: what Redis held of the counter when it lost its data,
// unless the node deciding the counter's partition then held it whole in memory and
// went on deciding the partition until its write-back in full of it reached Redis; and
// what a write in doubt of a counter handed on to another node carried, when its sender
// leaves it to the receiver's write-back in full (owner dropSentInHandoffs) and the receiver
// does not make that write-back either. A counter that loses counts may admit up to its
// limit again.
//
// Each write-back still owed is a wipeHeld: a node's run that holds counts of a counter
// in memory which it alone holds, and must write back in full. It is settled when Redis
// applies a base of the counter written by that run (wipeWrittenBack), and allows its
// counts lost when that run stops holding the counter's partition as its own memory
// first: it crashes or stops (stopsWith), its lease lapses (lapsed), or the partition
// leaves the Owned state (moved away, or its memory found stale: checkWipes, every
// 20 ms).

// wipeHeld is a counter's write-back in full owed by one node's run.
type wipeHeld struct {
	n      *node
	inc    uint64 // its run
	p      int
	amount int64 // what is lost if it is never made
}

// wipeCounter is told, as Redis loses its data, what Redis held of key (held) and the
// node that decides key's partition now with all of key in memory (nil: none).
func (w *world) wipeCounter(key string, held int64, whole *node) {
	for _, e := range slices.Clone(w.wiped[key]) {
		if whole == nil || e.n != whole || e.inc != whole.inc {
			w.wipeLost(key, e) // (the node that held it whole stopped deciding it unseen since the last check)
		}
	}
	if whole == nil {
		w.keys.lose(key, held)
		w.keys.overAdmit(key, allowLimit)
		return
	}
	w.owesWriteBack(key, whole, whole.ring.Partition(key), held)
}

// owesWriteBack notes that n's run owes a write-back in full of key, of partition p,
// without which amount of it is lost.
func (w *world) owesWriteBack(key string, n *node, p int, amount int64) {
	for _, e := range w.wiped[key] {
		if e.n == n && e.inc == n.inc {
			e.amount += amount
			return
		}
	}
	w.wiped[key] = append(w.wiped[key], &wipeHeld{n: n, inc: n.inc, p: p, amount: amount})
}

// wipeLost allows key the loss e stands for, and forgets e.
func (w *world) wipeLost(key string, e *wipeHeld) {
	w.keys.lose(key, e.amount)
	w.keys.overAdmit(key, allowLimit)
	w.forget(key, func(x *wipeHeld) bool { return x == e })
}

// forget drops the write-backs of key that match, and key itself once none is owed, so
// that owedKeys stays as short as what is owed.
func (w *world) forget(key string, match func(*wipeHeld) bool) {
	if w.wiped[key] = slices.DeleteFunc(w.wiped[key], match); len(w.wiped[key]) == 0 {
		delete(w.wiped, key)
	}
}

// owedKeys is the keys some run owes a write-back of, in order: the checks run after
// every step, and sorting every tracked key there took a third of the simulation's time.
func (w *world) owedKeys() []string {
	if len(w.wiped) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(w.wiped))
}

// wipeWrittenBack is told of each delta Redis applies, and who wrote it: a base (a
// counter's whole state, written back after a loss) settles what that writer's run
// owed of the counter.
func (w *world) wipeWrittenBack(key, writer string, base bool) {
	if !base {
		return
	}
	if w.based[key] == nil {
		w.based[key] = map[string]time.Duration{}
	}
	w.based[key][writer] = w.sched.now
	w.forget(key, func(e *wipeHeld) bool { return owner.WriterName(e.n.name, e.inc) == writer })
}

// wipeHolderStops allows the loss of what n's run owes of the counters of (by key): it
// stops holding them.
func (w *world) wipeHolderStops(n *node, of func(key string) bool) {
	for _, k := range w.owedKeys() {
		for _, e := range slices.Clone(w.wiped[k]) {
			if e.n == n && of(k) {
				w.wipeLost(k, e)
			}
		}
	}
}

// checkWipes allows the loss of each write-back owed by a run that is over, or whose
// partition is no longer Owned there.
func (w *world) checkWipes() {
	for _, k := range w.owedKeys() {
		for _, e := range slices.Clone(w.wiped[k]) {
			if n := e.n; !n.up || n.inc != e.inc || n.owner.PartitionState(e.p) != owner.Owned {
				w.wipeLost(k, e)
			}
		}
	}
}

// inDoubtDropped is told of a delta n took out of its write-behind in doubt (Rewrite,
// from owner dropSentInHandoffs: Redis lost its data, and the counter went to other nodes
// under a fence of that write): it leaves those counts to the receivers' write-backs in
// full. Each receiver that has not written the counter back since the loss owes it.
func (w *world) inDoubtDropped(n *node, writer string, d fallback.Delta) {
	var amount int64
	for _, b := range d.Buckets {
		amount += int64(b.Count)
	}
	if amount == 0 || n.ring == nil {
		return
	}
	p := n.ring.Partition(d.Key)
	var to []*node
	if f := w.fenced[fenceAt{writer, p}]; f != nil {
		for r, inc := range f.to {
			if r.inc == inc && r.up {
				to = append(to, r)
			}
		}
	}
	slices.SortFunc(to, func(a, b *node) int { return a.idx - b.idx })
	owed := false
	for _, r := range to {
		if w.based[d.Key][owner.WriterName(r.name, r.inc)] > w.lastWipe {
			return // written back since the loss: it holds them
		}
		w.owesWriteBack(d.Key, r, p, amount)
		owed = true
	}
	if !owed {
		w.trace("%s drops a write in doubt of %d of %s, and no node it went to holds it", n.name, amount, d.Key)
		w.keys.lose(d.Key, amount)
		w.keys.overAdmit(d.Key, allowLimit)
	}
}

// lateDropped is told of a delta of a call in doubt that never applied, which n took out
// of its write-behind (DropInDoubt, from owner dropLapsedInDoubt: Redis lost its data,
// and the partition's lease lapsed on n since): no one holds its counts.
func (w *world) lateDropped(n *node, d fallback.Delta) {
	var amount int64
	for _, b := range d.Buckets {
		amount += int64(b.Count)
	}
	if amount == 0 {
		return
	}
	w.trace("%s drops a write in doubt of %d of %s that never applied", n.name, amount, d.Key)
	w.keys.lose(d.Key, amount)
	w.keys.overAdmit(d.Key, allowLimit)
}

// lateMiss is a node's memory of a partition, in one generation, that lacks a late
// write of a counter of it (world.noteWrite): until its owner reloads it, that memory
// does not hold the counter whole.
type lateMiss struct {
	n   *node
	inc uint64
	gen uint64
}

// lateUnseen notes that a late write of key landed in Redis: every node's memory of its
// partition as it is now lacks it.
func (w *world) lateUnseen(key string) {
	if w.lateMisses == nil {
		w.lateMisses = map[string][]lateMiss{}
	}
	for _, m := range w.nodes {
		if m.up && m.ring != nil {
			w.lateMisses[key] = append(w.lateMisses[key], lateMiss{m, m.inc, ownerprobe.Of(m.owner).Gen(m.ring.Partition(key))})
		}
	}
}

// lacksLate reports whether n's memory of key still lacks a late write of it: seed
// 5466's owner, a late write of the last owner not reloaded yet, held what it had of the
// counter when Redis lost its data, and wrote that back in full without the late write.
func (w *world) lacksLate(n *node, key string) bool {
	for _, e := range w.lateMisses[key] {
		if e.n == n && e.inc == n.inc && ownerprobe.Of(n.owner).Gen(n.ring.Partition(key)) == e.gen {
			return true
		}
	}
	return false
}
