package node

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leapcount/leapcount/borrow"
	"github.com/leapcount/leapcount/cluster"
	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/route"
)

// Limit slices (docs/slices-and-replicas.md): this node asks owners for slices of the
// limits of counters whose allows it forwards often, decides their allows from them,
// and gives back what it did not spend. The owner's side is in package owner.

// giveBackEvery is how often the slices that ended are given back.
const giveBackEvery = 100 * time.Millisecond

// giveBackTimeout bounds one round of returns.
const giveBackTimeout = 2 * time.Second

// newBorrower makes this node a borrower with --slices; it is set before the router
// serves (startSlices starts giving back).
func (n *Node) newBorrower() error {
	if !n.cfg.Slices {
		return nil
	}
	b, err := borrow.New(borrow.Config{Now: n.clock.Since, HotAfter: n.cfg.SliceAfter, Drift: n.cfg.Lease.Drift})
	if err != nil {
		return err
	}
	n.borrower = b
	n.router.Slices = &route.SliceConfig{Borrower: b, Now: n.clock.Since, Lends: n.lends,
		Spent: func(key string) { n.hot.Observe(key, n.cfg.Now()) }}
	return nil
}

// startSlices starts giving back the slices that end, once the node serves.
func (n *Node) startSlices() {
	if n.borrower == nil {
		return
	}
	// What is held when the node stops is not given back: the counters stay that much
	// too high until the slices' buckets leave their windows.
	n.every(giveBackEvery, n.giveBack)
}

// lends reports whether member name advertises featureSlices.
func (n *Node) lends(name string) bool {
	for _, m := range n.cluster.Members() {
		if m.Name == name {
			return m.Features&featureSlices != 0 && (m.State == cluster.StateAlive || m.State == cluster.StateLeaving)
		}
	}
	return false
}

// giveBack sends the returns due, in one batch: the router sends each to its counter's
// owner now, which takes it if it lent the slice.
func (n *Node) giveBack() {
	due := n.borrower.Due()
	if len(due) == 0 {
		return
	}
	ops := make([]counter.Op, len(due))
	for i := range due {
		ops[i] = due[i].Op
	}
	res := make([]counter.Result, len(ops))
	ctx, cancel := context.WithTimeout(context.Background(), giveBackTimeout)
	defer cancel()
	counter.Do(ctx, n.router, ops, res)
	for i := range due {
		n.borrower.Sent(due[i], res[i].Err)
	}
}

// sliceMetrics are the borrower's counts and the owner's slices out.
func (n *Node) sliceMetrics() []prometheus.Collector {
	stat := func(f func(borrow.Stats) uint64) func() float64 {
		return func() float64 {
			if n.borrower == nil {
				return 0
			}
			return float64(f(n.borrower.Stats()))
		}
	}
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "leapcount_slices_asked_total",
			Help: "Slices of hot counters' limits this node asked their owners for."}, stat(func(s borrow.Stats) uint64 { return s.Asked })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "leapcount_slices_borrowed_total",
			Help: "Slices owners lent this node."}, stat(func(s borrow.Stats) uint64 { return s.Lent })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "leapcount_slices_spent_total",
			Help: "Units of slices this node admitted (allows decided here from a slice)."}, stat(func(s borrow.Stats) uint64 { return s.Spent })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "leapcount_slices_returned_total",
			Help: "Slices whose unspent part this node gave back and the owner answered."}, stat(func(s borrow.Stats) uint64 { return s.Returned })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "leapcount_slices_expired_total",
			Help: "Slices that ended at their deadline here, not spent to the last unit."}, stat(func(s borrow.Stats) uint64 { return s.Expired })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leapcount_slices_held",
			Help: "Slices this node holds now."}, func() float64 {
			if n.borrower == nil {
				return 0
			}
			return float64(n.borrower.Held())
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "leapcount_slices_lent_total",
			Help: "Slices of its counters' limits this node lent to others."}, func() float64 { l, _ := n.owner.SlicesLent(); return float64(l) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "leapcount_slices_taken_back_total",
			Help: "Returns of slices this node lent that it took back (each at most once)."}, func() float64 { _, b := n.owner.SlicesLent(); return float64(b) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leapcount_slices_lent_outstanding",
			Help: "Slices this node lent whose return it still takes."}, func() float64 { return float64(n.owner.SlicesOut()) }),
	}
}
