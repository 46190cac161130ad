package route

import (
	"time"

	"github.com/leapcount/leapcount/borrow"
	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/ring"
)

// Limit slices (package borrow): allows of a counter this node holds a slice of are
// decided here, where they arrive, and the forwarded allows of hot counters ask their
// owner for a slice (a counter.Borrow). Only owners that advertise slices (Lends) are
// sent a Borrow; a Borrow routed again goes as the allow it was.

// SliceConfig turns limit slices on for a Router.
type SliceConfig struct {
	Borrower *borrow.Borrower
	Now      func() time.Duration     // the Borrower's clock
	Lends    func(member string) bool // whether the member takes Borrows
}

// slicedCall is a batch some of whose allows were decided from slices or go as Borrows:
// the rest is decided as a batch of its own, and its answers go back in place.
type slicedCall struct {
	r     *Router
	b     *counter.Batch
	rest  counter.Batch
	place []int // rest's ops' places in b (nil: rest is b's own slices)
	asked []int // rest's ops sent as Borrows
	sent  time.Duration
}

// useSlices decides b's allows that a slice held decides, and turns the forwarded allows
// of hot counters into Borrows. It returns the batch left to decide (b itself when
// nothing changed), or nil when every op was answered.
func (r *Router) useSlices(rg *ring.Ring, b *counter.Batch) (rest *counter.Batch, call *slicedCall) {
	s := r.Slices
	if s == nil || rg == nil {
		return b, nil
	}
	var spent, asked []int
	for i := range b.Ops {
		op := &b.Ops[i]
		if op.Kind != counter.Allow || !op.Checked() {
			continue
		}
		m, ok := rg.SlotOwner(op.Slot)
		if !ok || m.Name == r.self {
			continue
		}
		if res, _, ok := s.Borrower.Spend(op); ok {
			b.Results[i] = res
			spent = append(spent, i)
		} else if ask := s.Borrower.Ask(op); ask > 0 {
			if !s.Lends(m.Name) { // (asked second: Ask is the cheaper, and mostly 0)
				s.Borrower.Failed(op)
				continue
			}
			op.Kind, op.Ask = counter.Borrow, ask
			asked = append(asked, i)
		}
	}
	if len(spent) == 0 && len(asked) == 0 {
		return b, nil
	}
	if len(spent) == len(b.Ops) {
		return nil, nil
	}
	c := &slicedCall{r: r, b: b, sent: s.Now()}
	if len(spent) == 0 {
		c.rest = counter.Batch{Ops: b.Ops, Results: b.Results}
		c.asked = asked
	} else {
		c.keep(spent, asked)
	}
	c.rest.Done = c.done
	return &c.rest, c
}

// keep makes rest the ops of b not in spent (both ascending), noting which were asked.
func (c *slicedCall) keep(spent, asked []int) {
	n := len(c.b.Ops) - len(spent)
	c.rest = counter.Batch{Ops: make([]counter.Op, 0, n), Results: make([]counter.Result, n)}
	c.place = make([]int, 0, n)
	for i := range c.b.Ops {
		if len(spent) > 0 && spent[0] == i {
			spent = spent[1:]
			continue
		}
		if len(asked) > 0 && asked[0] == i {
			asked = asked[1:]
			c.asked = append(c.asked, len(c.rest.Ops))
		}
		c.place = append(c.place, i)
		c.rest.Ops = append(c.rest.Ops, c.b.Ops[i])
	}
}

// settle hands the Borrows' answers to the Borrower, gives the caller its allows back
// as it sent them (a slice lent is no business of its), and puts the rest's answers in
// place.
func (c *slicedCall) settle() {
	for _, k := range c.asked {
		op, res := &c.rest.Ops[k], &c.rest.Results[k]
		if op.Kind == counter.Borrow {
			c.r.Slices.Borrower.Got(op, c.sent, *res)
		} else {
			c.r.Slices.Borrower.Failed(op) // routed again as an allow (unborrow)
		}
		res.Lent = nil
		op.Kind, op.Ask = counter.Allow, 0
		if c.place != nil {
			c.b.Ops[c.place[k]].Kind, c.b.Ops[c.place[k]].Ask = counter.Allow, 0
		}
	}
	for k, i := range c.place {
		c.b.Results[i] = c.rest.Results[k]
	}
}

func (c *slicedCall) done() {
	c.settle()
	c.b.Done()
}

// unborrow sends the Borrows among the ops to route again as the allows they were: the
// owner they go to now may not take Borrows.
func unborrow(ops []counter.Op, idx []int) {
	for _, i := range idx {
		if ops[i].Kind == counter.Borrow {
			ops[i].Kind, ops[i].Ask = counter.Allow, 0
		}
	}
}
