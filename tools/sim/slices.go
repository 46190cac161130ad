package sim

import (
	"errors"
	"time"

	"github.com/leapcount/leapcount/borrow"
	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
)

// Limit slices (package borrow, owner/slices.go): every node is a borrower of the allow
// keys it forwards. A counter is hot from its first forward here, so that slices are lent,
// spent, ended and returned throughout a run, with every fault.

// sliceStats counts what the borrowers did in a run.
type sliceStats struct {
	Lent, Spent, Returned, TakenBack int
}

// slicePromise is what a lender promised of a slice, in simulated time: that every
// admission from it happens before the bucket it is counted in ends, as the lender's
// clock ran when lending, and before the lender's lease (as it held it then) ended.
type slicePromise struct {
	lender           string
	bucketEnd, lease time.Duration
}

// noteLent records what n promised of the slice it just lent with op, a Borrow.
func (w *world) noteLent(n *node, op *counter.Op, l *counter.Lent) {
	sp := leaparray.Spec{WindowMs: op.Window, Buckets: op.Buckets}
	wall := n.wall()
	bucketEnd := w.sched.now + time.Duration((sp.Bucket(wall)+1)*sp.BucketMs()-wall)*time.Millisecond
	lease := n.startAt + time.Duration(float64(n.keeper.DecideUntil(n.ring.Partition(op.Key)))/n.rate)
	if w.lent == nil {
		w.lent = map[uint64]slicePromise{}
	}
	w.lent[l.ID] = slicePromise{lender: n.name, bucketEnd: bucketEnd, lease: lease}
}

// checkSpend fails the run if slice id is spent now, after its lender's promise ended:
// the borrower must stop before (package borrow).
func (w *world) checkSpend(id uint64) {
	p, ok := w.lent[id]
	switch {
	case !ok:
		w.fail("a slice no owner lent (%d) was spent", id)
	case w.sched.now > min(p.bucketEnd, p.lease):
		w.fail("slice %d of %s spent %v after its end (its bucket ends at %.3fs, the lease it was lent under at %.3fs)",
			id, p.lender, w.sched.now-min(p.bucketEnd, p.lease), p.bucketEnd.Seconds(), p.lease.Seconds())
	}
}

// sliceTick is how often (node clock) a node gives back the slices that ended.
const sliceTick = 100 * time.Millisecond

// newBorrower is a run's Borrower.
func (n *node) newBorrower() *borrow.Borrower {
	b, err := borrow.New(borrow.Config{Now: n.mono, HotAfter: 1, Drift: n.w.leaseCfg.Drift})
	if err != nil {
		panic(err)
	}
	return b
}

// borrow sends o, forwarded from entry to owner, with an ask for a slice of ask. The
// owner counts a slice it lends at once, so the key may count up to it more than was
// acknowledged (what the borrower does not spend, or spends and crashes with, and what
// does not come back); none of it is admitted past the limit.
func (c *client) borrow(o counter.Op, ask int64, entry *node, owner string, back func(counter.Result, decided)) {
	w := c.w
	b := borrow.AskFor(&o, ask)
	sent, run := entry.mono(), entry.inc
	c.forward(o, entry, owner, false, &b, func(res, asked counter.Result, d decided) {
		if entry.inc == run { // (else the borrower's run ended, its slices with it)
			switch {
			case asked.Lent != nil:
				w.slices.Lent++
				w.keys.reserved(o.Key, asked.Lent.N)
				entry.borrower.Got(&b, sent, asked)
			case errors.Is(asked.Err, counter.ErrOutcomeUnknown):
				w.keys.reserved(o.Key, ask) // it may have been lent
				entry.borrower.Failed(&b)
			default:
				entry.borrower.Failed(&b)
			}
		}
		back(res, d)
	})
}

// giveBack sends the returns of the slices that ended to their counters' owners. A
// return may reach its owner twice (dup): the owner takes it once.
func (n *node) giveBack() {
	w := n.w
	c := &client{w: w}
	run := n.inc
	for _, r := range n.borrower.Due() {
		owner, ok := n.ownerOf(r.Op.Key)
		if !ok {
			continue
		}
		done := func(res counter.Result, _ decided) {
			if res.Existed {
				w.slices.TakenBack++
			}
			w.slices.Returned++
			if n.inc == run {
				n.borrower.Sent(r, res.Err)
			}
		}
		if owner == n.name {
			n.decide([]counter.Op{r.Op}, func(res []counter.Result) { done(res[0], decided{}) })
			continue
		}
		c.forward(r.Op, n, owner, true, nil, func(res, _ counter.Result, d decided) { done(res, d) })
	}
}
