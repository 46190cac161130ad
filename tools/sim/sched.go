package sim

import (
	"container/heap"
	"time"
)

// event is one thing that happens at a moment of simulated time. An event of a node
// runs only while that run of the node lives (inc), and waits while it is paused.
type event struct {
	at     time.Duration
	seq    uint64
	node   *node // nil: the world's own
	inc    uint64
	fn     func()
	index  int
	cancel bool
}

type events []*event

func (q events) Len() int { return len(q) }
func (q events) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q events) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *events) Push(x any) {
	e := x.(*event)
	e.index = len(*q)
	*q = append(*q, e)
}
func (q *events) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// sched runs events in time order, ties in the order they were made: one goroutine,
// one clock, so a seed replays exactly.
type sched struct {
	now   time.Duration
	seq   uint64
	q     events
	steps int
}

// at schedules fn at t (never before now) for node n (nil: the world).
func (s *sched) at(t time.Duration, n *node, fn func()) *event {
	s.seq++
	e := &event{at: max(t, s.now), seq: s.seq, node: n, fn: fn}
	if n != nil {
		e.inc = n.inc
	}
	heap.Push(&s.q, e)
	return e
}

func (s *sched) after(d time.Duration, n *node, fn func()) *event { return s.at(s.now+d, n, fn) }

// maxSteps bounds a run's events: a few hundred thousand is usual, so past this
// something reschedules itself without time passing.
const maxSteps = 20_000_000

// runUntil runs the events due up to end, and leaves now at end.
func (s *sched) runUntil(end time.Duration) {
	for len(s.q) > 0 && s.q[0].at <= end {
		e := heap.Pop(&s.q).(*event)
		s.now = e.at
		if e.cancel {
			continue
		}
		if n := e.node; n != nil {
			if !n.up || e.inc != n.inc {
				continue // that run of the node is gone
			}
			if n.pausedUntil > s.now {
				e.at = n.pausedUntil // frozen: it happens when the node runs again
				heap.Push(&s.q, e)
				continue
			}
		}
		if s.steps++; s.steps > maxSteps {
			panic("sim: a run took more than maxSteps events: something loops at one instant")
		}
		e.fn()
	}
	s.now = max(s.now, end)
}
