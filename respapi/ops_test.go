package respapi

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
)

// clients are the go-redis setups the counter commands must work with: the default
// one asks for RESP3 with HELLO 3 and has to fall back to 2.
var clients = map[string]func(addr string) *redis.Options{
	"default":   func(addr string) *redis.Options { return &redis.Options{Addr: addr} },
	"protocol2": func(addr string) *redis.Options { return &redis.Options{Addr: addr, Protocol: 2} },
}

func newClient(t testing.TB, opts *redis.Options) *redis.Client {
	t.Helper()
	opts.MaxRetries = -1 // an error must show, not be retried away
	rc := redis.NewClient(opts)
	t.Cleanup(func() { rc.Close() })
	return rc
}

// forEachClient runs test once per go-redis setup, each against a fresh server.
func forEachClient(t *testing.T, test func(t *testing.T, ts *testServer, rc *redis.Client)) {
	for name, opts := range clients {
		t.Run(name, func(t *testing.T) {
			ts := startServer(t, nil)
			test(t, ts, newClient(t, opts(ts.addr)))
		})
	}
}

// want runs a command and checks its reply, rendered with fmt.Sprint.
func want(t *testing.T, rc *redis.Client, reply string, args ...any) {
	t.Helper()
	got, err := rc.Do(context.Background(), args...).Result()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	if fmt.Sprint(got) != reply {
		t.Fatalf("%v: got %v; want %s", args, got, reply)
	}
}

func TestIncrAndCount(t *testing.T) {
	forEachClient(t, func(t *testing.T, ts *testServer, rc *redis.Client) {
		want(t, rc, "1", "SW.INCR", "a", "10s")
		want(t, rc, "6", "SW.INCR", "a", "10s", "BY", "5")
		want(t, rc, "7", "sw.incr", "a", "10000", "buckets", "10", "by", "1")
		want(t, rc, "7", "SW.COUNT", "a", "10s")
		want(t, rc, "7", "Sw.CoUnT", "a", "10s", "BuCkEtS", "10")
		want(t, rc, "0", "SW.COUNT", "nobody", "10s")
	})
}

func TestOptionsInAnyOrder(t *testing.T) {
	forEachClient(t, func(t *testing.T, ts *testServer, rc *redis.Client) {
		want(t, rc, "3", "SW.INCR", "o", "10s", "BUCKETS", "5", "BY", "3")
		want(t, rc, "5", "SW.INCR", "o", "10s", "BY", "2", "BUCKETS", "5")
		want(t, rc, "[1 8 2 0]", "SW.ALLOW", "o", "10s", "10", "BUCKETS", "5", "BY", "3")
		want(t, rc, "[1 9 1 0]", "SW.ALLOW", "o", "10s", "10", "by", "1", "buckets", "5")
		want(t, rc, "0", "SW.COUNT", "o", "10s") // 10 buckets: another counter
	})
}

func TestCountSlidesWithTheWindow(t *testing.T) {
	forEachClient(t, func(t *testing.T, ts *testServer, rc *redis.Client) {
		want(t, rc, "3", "SW.INCR", "s", "10s", "BY", "3")
		ts.clock.Advance(5_000)
		want(t, rc, "5", "SW.INCR", "s", "10s", "BY", "2")
		ts.clock.Advance(4_999)
		want(t, rc, "5", "SW.COUNT", "s", "10s")
		ts.clock.Advance(1) // the bucket of t0 leaves the window
		want(t, rc, "2", "SW.COUNT", "s", "10s")
		ts.clock.Advance(5_000)
		want(t, rc, "0", "SW.COUNT", "s", "10s")
	})
}

func TestAllow(t *testing.T) {
	forEachClient(t, func(t *testing.T, ts *testServer, rc *redis.Client) {
		want(t, rc, "[1 1 2 0]", "SW.ALLOW", "u", "10s", "3")
		want(t, rc, "[1 2 1 0]", "SW.ALLOW", "u", "10s", "3")
		want(t, rc, "[1 3 0 0]", "SW.ALLOW", "u", "10s", "3")
		want(t, rc, "[0 3 0 10000]", "SW.ALLOW", "u", "10s", "3")
		ts.clock.Advance(1_500)
		want(t, rc, "[0 3 0 8500]", "SW.ALLOW", "u", "10s", "3")
		want(t, rc, "[0 3 0 -1]", "SW.ALLOW", "u", "10s", "3", "BY", "4") // never
		ts.clock.Advance(8_500)
		want(t, rc, "[1 2 1 0]", "SW.ALLOW", "u", "10s", "3", "BY", "2")
		want(t, rc, "[0 0 0 -1]", "SW.ALLOW", "zero", "1s", "0")
		max := fmt.Sprint(int64(counter.MaxLimit))
		want(t, rc, fmt.Sprintf("[1 %d %d 0]", counter.MaxN, int64(counter.MaxLimit)-counter.MaxN),
			"SW.ALLOW", "big", "1s", max, "BY", fmt.Sprint(counter.MaxN))
	})
}

func TestReset(t *testing.T) {
	forEachClient(t, func(t *testing.T, ts *testServer, rc *redis.Client) {
		want(t, rc, "9", "SW.INCR", "r", "1m", "BY", "9")
		want(t, rc, "1", "SW.RESET", "r", "1m")
		want(t, rc, "0", "SW.COUNT", "r", "1m")
		want(t, rc, "0", "SW.RESET", "r", "1m")
		want(t, rc, "0", "SW.RESET", "r", "1m", "BUCKETS", "60")
	})
}

func TestWindowForms(t *testing.T) {
	forEachClient(t, func(t *testing.T, ts *testServer, rc *redis.Client) {
		for i, w := range []string{"60s", "1m", "60000", "1m0s", "60000ms"} {
			want(t, rc, fmt.Sprint(i+1), "SW.INCR", "w", w)
		}
		for _, w := range []string{"1ms", "500ms", "1h", "744h"} {
			want(t, rc, "1", "SW.INCR", "w", w, "BUCKETS", "1")
		}
	})
}

func TestKeysAreAnyBytes(t *testing.T) {
	forEachClient(t, func(t *testing.T, ts *testServer, rc *redis.Client) {
		for _, key := range []string{"ключ 😀", "with\r\nCRLF", "\x00\xff", " ", strings.Repeat("k", counter.DefaultMaxKeyBytes)} {
			want(t, rc, "1", "SW.INCR", key, "1m")
			want(t, rc, "1", "SW.COUNT", key, "1m")
		}
	})
}

func TestGoRedisPipeline(t *testing.T) {
	forEachClient(t, func(t *testing.T, ts *testServer, rc *redis.Client) {
		ctx := context.Background()
		cmds, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
			for range 50 {
				p.Do(ctx, "SW.INCR", "p", "1m")
			}
			p.Do(ctx, "SW.INCR", "p", "1m", "BY", "0") // bad, in the middle
			p.Do(ctx, "SW.COUNT", "p", "1m")
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), "invalid n") {
			t.Fatalf("pipeline error: got %v; want the invalid n of the bad command", err)
		}
		for i, c := range cmds[:50] {
			if got := c.(*redis.Cmd).Val(); fmt.Sprint(got) != fmt.Sprint(i+1) {
				t.Fatalf("pipelined SW.INCR %d: got %v; want %d", i, got, i+1)
			}
		}
		if got := cmds[51].(*redis.Cmd).Val(); fmt.Sprint(got) != "50" {
			t.Fatalf("SW.COUNT after the pipeline: got %v; want 50", got)
		}
	})
}

func TestMaxKeyBytesComesFromLimits(t *testing.T) {
	limits := counter.Limits{MaxKeyBytes: 1000}
	ts := startServer(t, func(c *Config) {
		c.Limits = limits
		c.Decider = &counter.Local{Store: leaparray.NewStore(), Now: newClock().Now, Limits: limits}
	})
	c := ts.dial(t)
	wantReply(t, c.do("SW.INCR", strings.Repeat("x", 1000), "1m"), ":1")
	wantReply(t, c.do("SW.INCR", strings.Repeat("x", 1001), "1m"), "-ERR key is too long: 1001 bytes, at most 1000")
}
