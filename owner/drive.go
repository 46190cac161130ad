package owner

import "github.com/leapcount/leapcount/internal/lockrank"

// The owner's work on partitions is done in steps, each under mu: a ring change, a
// lapse, a tick, a received Handoff, the outcome of a Redis or rpc call. A step never
// makes a call itself and never runs an op's completion: it asks for its calls
// (ask) and for a wake of parked ops (wakeAfter), and unlock carries them out once mu
// is let go, as etcd raft's Ready is handled outside the node's state.
//
// Steps are posted to one driver: the goroutine that posts when no step is being driven
// drives every step posted until none is left, in order; the others return at once
// (post) or wait for their step to be taken (do). So the outcome of a call or a timer
// never holds the goroutine it came on waiting on mu for another's step, nor on a
// socket for an op it woke.

// inbox holds the steps posted while another goroutine drives.
type inbox struct {
	mu      lockrank.Mutex[lockrank.OwnerInbox]
	queue   []posted
	driving bool
}

// posted is a step and, for do, what its caller waits on: closed once the step's calls
// were made and its wake done.
type posted struct {
	fn   func()
	done chan struct{}
}

// post hands fn, a step (the rest of one a call's outcome began, say), to the driver:
// fn runs under mu, after every step posted before it. The caller must not hold mu.
func (o *Owner) post(fn func()) { o.enqueue(posted{fn: fn}) }

// do runs fn as a step, and returns once it ran and its calls were made: on this
// goroutine, or on the driver's. It must not be called from a step, nor from a call a
// step asked for: the driver would wait for itself.
func (o *Owner) do(fn func()) {
	done := make(chan struct{})
	o.enqueue(posted{fn: fn, done: done})
	<-done
}

// enqueue queues s, and drives unless another goroutine does.
func (o *Owner) enqueue(s posted) {
	in := &o.inbox
	in.mu.Lock()
	in.queue = append(in.queue, s)
	if in.driving {
		in.mu.Unlock()
		return
	}
	in.driving = true
	in.mu.Unlock()
	o.drive(s.done)
}

// drive takes the steps queued, one at a time and in order, until none is left; or,
// for a goroutine that came with a step of its own to wait for (mine: do's), until that
// step is taken, another goroutine then taking the rest. Those that come for their own
// step (the membership's SetRing, the keeper's Lapsed, Run's Tick) are not kept driving
// steps that keep coming: the keeper would miss its heartbeats (the cluster test
// TestLeaveHandsCountersOverWithoutRedis under load). Outcomes' and timers' goroutines
// have nothing else to do, and drive until the queue is empty. (A simulation never
// queues a step behind another: it posts one at a time, and each runs at once.)
func (o *Owner) drive(mine chan struct{}) {
	in := &o.inbox
	for {
		in.mu.Lock()
		if len(in.queue) == 0 {
			in.queue, in.driving = nil, false
			in.mu.Unlock()
			return
		}
		s := in.queue[0]
		in.queue = in.queue[1:]
		in.mu.Unlock()
		// One at a time, calls made and ops woken between them, as each ran alone.
		o.lock()
		s.fn()
		o.unlock()
		if s.done != nil {
			close(s.done)
		}
		if mine != nil && s.done == mine {
			in.mu.Lock()
			more := len(in.queue) > 0
			if !more {
				in.queue, in.driving = nil, false
			}
			in.mu.Unlock()
			if more {
				go o.drive(nil) // (still driving: no one else starts)
			}
			return
		}
	}
}

// lock starts a step; only the driver takes mu, and readers that only look (probe.go,
// WriteBehindStats, RedisLosses: they ask for nothing).
func (o *Owner) lock() { o.mu.Lock() }

// unlock ends a step: it lets mu go, then makes the calls the step asked for, in the
// order asked, and wakes the parked ops if it was asked to.
func (o *Owner) unlock() {
	calls, wake := o.asked, o.wakeDue
	o.asked, o.wakeDue = nil, false
	o.mu.Unlock()
	for _, call := range calls {
		call()
	}
	if wake {
		o.wake()
	}
}

// ask records a call to make once the step ends (its outcome, later, is posted). The
// caller holds mu.
func (o *Owner) ask(call func()) { o.asked = append(o.asked, call) }

// wakeAfter has the step end by waking the parked ops: a partition may have become
// decidable. The caller holds mu.
func (o *Owner) wakeAfter() { o.wakeDue = true }
