package route

import (
	"time"

	"github.com/leapcount/leapcount/borrow"
	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/ring"
)

// Limit slices (package borrow): allows (and incrs judged by a limit) of a counter this
// node holds a slice of are decided here, where they arrive, and a forwarded op of a
// hot counter goes with an ask for a slice (a counter.Borrow of nothing) to the same
// owner, in the same batch. Only owners that advertise slices (Lends) are asked; an ask
// routed again goes as a count, which any owner takes.

// SliceConfig turns limit slices on for a Router.
type SliceConfig struct {
	Borrower *borrow.Borrower
	Now      func() time.Duration     // the Borrower's clock
	Lends    func(member string) bool // whether the member takes Borrows

	// Spent, when set, is told the key of each op decided from a slice: such an op is
	// decided here, not on its owner, so this node's hot-key sketch must hear it.
	Spent func(key string)
}

// slicedCall is a batch some of whose ops were decided from slices or go with asks: the
// rest and the asks are decided as a batch of their own, whose answers go back in place.
type slicedCall struct {
	r     *Router
	b     *counter.Batch
	rest  counter.Batch
	place []int // rest's first ops' places in b; the asks follow them
	sent  time.Duration
}

// useSlices decides b's ops that a slice held decides, and adds an ask for a slice
// after the forwarded ops of hot counters. It returns the batch left to decide (b itself
// when nothing changed, nil when every op was answered), and the call that settles it.
func (r *Router) useSlices(rg *ring.Ring, b *counter.Batch) (rest *counter.Batch, call *slicedCall) {
	s := r.Slices
	if s == nil || rg == nil {
		return b, nil
	}
	var spent []int
	var asks []counter.Op
	for i := range b.Ops {
		op := &b.Ops[i]
		if !borrow.Sliceable(op) || !op.Checked() {
			continue
		}
		m, ok := rg.SlotOwner(op.Slot)
		if !ok || m.Name == r.self {
			continue
		}
		if res, _, ok := s.Borrower.Spend(op); ok {
			b.Results[i] = res
			spent = append(spent, i)
			if s.Spent != nil {
				s.Spent(op.Key)
			}
		} else if ask := s.Borrower.Ask(op); ask > 0 {
			if !s.Lends(m.Name) { // (asked second: Ask is the cheaper, and mostly 0)
				s.Borrower.Failed(op)
				continue
			}
			asks = append(asks, borrow.AskFor(op, ask))
		}
	}
	switch {
	case len(spent) == 0 && len(asks) == 0:
		return b, nil
	case len(spent) == len(b.Ops):
		return nil, nil
	}
	c := &slicedCall{r: r, b: b, sent: s.Now()}
	c.keep(spent, asks)
	c.rest.Done = c.done
	return &c.rest, c
}

// keep makes rest b's ops not in spent (ascending), then asks.
func (c *slicedCall) keep(spent []int, asks []counter.Op) {
	n := len(c.b.Ops) - len(spent)
	c.rest = counter.Batch{Ops: make([]counter.Op, 0, n+len(asks)), Results: make([]counter.Result, n+len(asks))}
	c.place = make([]int, 0, n)
	for i := range c.b.Ops {
		if len(spent) > 0 && spent[0] == i {
			spent = spent[1:]
			continue
		}
		c.place = append(c.place, i)
		c.rest.Ops = append(c.rest.Ops, c.b.Ops[i])
	}
	c.rest.Ops = append(c.rest.Ops, asks...)
}

// settle hands the asks' answers to the Borrower and puts the rest's answers in place.
func (c *slicedCall) settle() {
	for k, i := range c.place {
		c.b.Results[i] = c.rest.Results[k]
	}
	for k := len(c.place); k < len(c.rest.Ops); k++ {
		op := &c.rest.Ops[k]
		if op.Kind == counter.Borrow {
			c.r.Slices.Borrower.Got(op, c.sent, c.rest.Results[k])
		} else {
			c.r.Slices.Borrower.Failed(op) // routed again as a count (unborrow)
		}
	}
}

func (c *slicedCall) done() {
	c.settle()
	c.b.Done()
}

// unborrow sends the asks among the ops to route again as counts: the owner they go to
// now may not take Borrows, and a count changes nothing.
func unborrow(ops []counter.Op, idx []int) {
	for _, i := range idx {
		if ops[i].Kind == counter.Borrow {
			ops[i].Kind, ops[i].Ask, ops[i].Limit = counter.Count, 0, 0
		}
	}
}
