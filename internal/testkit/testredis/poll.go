package testredis

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Poll calls cond until it returns nil, failing the test with cond's last error if
// timeout passes first. It is how tests wait for a condition instead of sleeping.
func Poll(tb testing.TB, timeout time.Duration, what string, cond func() error) {
	tb.Helper()
	if err := PollErr(timeout, cond); err != nil {
		tb.Fatalf("%s: still not true after %v: %v", what, timeout, err)
	}
}

// PollErr calls cond until it returns nil or timeout passes, and returns cond's last
// error (nil if it came true).
func PollErr(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	wait := time.Millisecond
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(wait) // the polling interval, not a stand-in for the condition
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// Client returns a go-redis client for the server (for tests that look at keys
// directly), closed when the test ends.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialerRetries: 1, MaxRetries: -1})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Do runs one command on a fresh connection and fails the test on error.
func (s *Server) Do(tb testing.TB, args ...any) any {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialerRetries: 1, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := c.Do(ctx, args...).Result()
	if err != nil && err != redis.Nil {
		tb.Fatalf("testredis: %v on %s: %v", args, s.Addr(), err)
	}
	return v
}
