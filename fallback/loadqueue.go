package fallback

import "sync"

// loadQueue coalesces the loads of concurrent callers (LoadMany). While one pipeline
// is in flight, the loads that arrive wait and go together in the next: under a flood
// of new keys from many connections, each wanting one counter, Redis sees a pipeline
// per round trip rather than a command per key, and the go-redis pool is not drained
// (BenchmarkLoadManyConcurrent). The caller that finds nothing in flight sends.
type loadQueue struct {
	mu      sync.Mutex
	waiting []*loadReq
	busy    bool // a pipeline is in flight, and its sender sends what waits next
}

// loadReq is one LoadMany call.
type loadReq struct {
	refs []CounterRef
	now  int64
	out  []Loaded
	done chan struct{} // closed once out is filled
}

// add queues r and reports whether its caller must send (nothing was in flight).
func (q *loadQueue) add(r *loadReq) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waiting = append(q.waiting, r)
	send := !q.busy
	q.busy = true
	return send
}

// take is everything waiting, for the sender.
func (q *loadQueue) take() []*loadReq {
	q.mu.Lock()
	defer q.mu.Unlock()
	reqs := q.waiting
	q.waiting = nil
	return reqs
}

// done is the sender's pipeline answered; it reports whether more wait, for the
// sender to send next.
func (q *loadQueue) done() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.busy = len(q.waiting) > 0
	return q.busy
}
