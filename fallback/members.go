package fallback

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Members is a cluster's list of members in Redis: the replicas of a Deployment behind
// one Service have no name that lists them all, but they share Redis. Each member lists
// its gossip address there at every join and re-join (List), and joins those the others
// listed; a listing not renewed within TTL is dropped, and a member that leaves drops its
// own (Unlist). Listings are timed by Redis's clock, so members' clocks need not agree.
type Members struct {
	st  *Store
	key string
	ttl time.Duration
}

// MaxMembersListed bounds a cluster's list (the oldest listings go first), and with it
// what one List costs Redis and the caller.
const MaxMembersListed = 256

// maxMemberAddr bounds one listed address: a gossip host:port is far shorter.
const maxMemberAddr = 300

// Members is the list of the cluster named cluster, whose listings last ttl.
func (st *Store) Members(cluster string, ttl time.Duration) *Members {
	return &Members{st: st, key: membersKey(cluster), ttl: ttl}
}

// membersKey is lc:members:<cluster>: no counter's key (lc:{<tag>}:...) has this form.
func membersKey(cluster string) string { return "lc:members:" + cluster }

// List lists addr, and returns the addresses of the other members listed, newest first.
func (m *Members) List(ctx context.Context, addr string) ([]string, error) {
	if addr == "" || len(addr) > maxMemberAddr {
		return nil, fmt.Errorf("fallback: member address %q: want 1 to %d bytes", addr, maxMemberAddr)
	}
	res, err := m.st.run(ctx, call{script: scripts.members, keys: []string{m.key},
		args: []any{addr, m.ttl.Milliseconds(), MaxMembersListed}}).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("fallback: list members: %w", err)
	}
	return slices.DeleteFunc(res, func(a string) bool { return a == addr || len(a) > maxMemberAddr }), nil
}

// Unlist drops addr from the list (a member that leaves), so that those who start next
// do not try it.
func (m *Members) Unlist(ctx context.Context, addr string) error {
	if err := m.st.guard(ctx, func() error { return m.st.rdb.ZRem(ctx, m.key, addr).Err() }); err != nil {
		return fmt.Errorf("fallback: unlist member: %w", err)
	}
	return nil
}
