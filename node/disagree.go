package node

import (
	"sync"
	"time"
)

// syncEvery is the least time between two state exchanges with one member started
// because it answered "not owner".
const syncEvery = time.Second

// ringSyncer exchanges gossip state with a member whose ring seems to differ from this
// node's (it answered forwarded ops "not owner"): gossip travels in UDP packets, and a
// node that lost the ones announcing a join or a leave keeps its old ring until the next
// periodic push-pull (30 s by default), forwarding meanwhile to nodes that no longer
// take the ops; those ops wait, and fail after RetryWait. One exchange brings whichever
// of the two is behind up to date, and the ops' retries then follow the new ring.
type ringSyncer struct {
	sync func(member string) error // cluster.SyncWith
	log  func(member string, err error)
	mu   sync.Mutex
	last map[string]time.Time // when an exchange with each member last started
}

// disagrees starts an exchange with member unless one started within syncEvery. It
// does not block: the router calls it from rpc readers.
func (s *ringSyncer) disagrees(member string) {
	now := time.Now()
	s.mu.Lock()
	if t, ok := s.last[member]; ok && now.Sub(t) < syncEvery {
		s.mu.Unlock()
		return
	}
	if s.last == nil || len(s.last) > 1024 { // members come and go: forget old ones
		s.last = map[string]time.Time{}
	}
	s.last[member] = now
	s.mu.Unlock()
	go func() {
		if err := s.sync(member); err != nil {
			s.log(member, err)
		}
	}()
}

// syncWith is ringSyncer's sync. The router calls it only once it has a ring, which
// membership builds after joinCluster has set n.cluster.
func (n *Node) syncWith(member string) error { return n.cluster.SyncWith(member) }
