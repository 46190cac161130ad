package node_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/node"
	"github.com/leapcount/leapcount/node/nodetest"
)

// --test-clock-offset shifts the wall clock a nil Now stands for, and only that: a Now
// given by a test wins, and offsets beyond a day are refused.
func TestTestClockOffsetShiftsNow(t *testing.T) {
	for _, off := range []time.Duration{0, 250 * time.Millisecond, -90 * time.Second} {
		before := time.Now().UnixMilli()
		got := node.Config{TestClockOffset: off}.WithDefaults().Now()
		after := time.Now().UnixMilli()
		if lo, hi := before+off.Milliseconds(), after+off.Milliseconds(); got < lo || got > hi {
			t.Errorf("offset %v: Now() = %d; want within [%d, %d]", off, got, lo, hi)
		}
	}
	fixed := node.Config{TestClockOffset: time.Hour, Now: func() int64 { return 42 }}.WithDefaults()
	if got := fixed.Now(); got != 42 {
		t.Errorf("a given Now with an offset: %d; want the given 42", got)
	}
	cfg := node.Config{Name: "n", TestClockOffset: 25 * time.Hour}.WithDefaults()
	var cerr *node.ConfigError
	if err := cfg.Validate(); !errors.As(err, &cerr) || cerr.Flag != "test-clock-offset" {
		t.Errorf("offset 25h: %v; want a ConfigError naming test-clock-offset", err)
	}
}

// A node with an offset puts an increment in the bucket of its shifted clock, as the
// bucket it writes to Redis shows (windows of 1m in 10 buckets of 6s; offset 1h).
func TestTestClockOffsetPicksTheBucket(t *testing.T) {
	rs := testredis.Start(t)
	c := nodetest.MakeCluster(t, 1, func(cfg *node.Config) {
		cfg.RedisURL = rs.URL()
		cfg.Now = nil
		cfg.TestClockOffset = time.Hour
	})
	ctx := context.Background()
	before := time.Now().Add(time.Hour).UnixMilli() / 6000
	if err := respClient(t, c.Nodes[0]).Do(ctx, "SW.INCR", "skewed", "1m").Err(); err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(time.Hour).UnixMilli() / 6000
	rc := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer rc.Close()
	var buckets []int64
	if err := wait.True(nodetest.Timeout, func() bool {
		buckets = bucketFields(rc.HKeys(ctx, "lc:{skewed}:60000:10").Val())
		return len(buckets) > 0
	}); err != nil {
		t.Fatalf("the increment never reached Redis: %v", err)
	}
	if len(buckets) != 1 || buckets[0] < before || buckets[0] > after {
		t.Fatalf("buckets in Redis %v; want one in [%d, %d], the shifted clock's (the wall clock's is %d)",
			buckets, before, after, time.Now().UnixMilli()/6000)
	}
}

// bucketFields are the bucket indexes among a counter hash's fields (the others, such
// as its head, are not numbers).
func bucketFields(fields []string) []int64 {
	var out []int64
	for _, f := range fields {
		if b, err := strconv.ParseInt(f, 10, 64); err == nil {
			out = append(out, b)
		}
	}
	return out
}

// A node whose counters' clock runs 30 s ahead (--test-clock-offset shifts Config.Now,
// the very clock the node measures and places ops by) in a cluster with Redis: every
// node measures it (leapcount_clock_offset_seconds against Redis and against each
// peer, NTP-style), both it and its peers list it as a status problem, it loads every
// counter it does not hold rather than skip the load, and no acknowledged increment is
// lost as its partitions move to the nodes whose clocks are right (it leaves) and back
// (it joins again). Among them, counters of a 10 s window incremented on it just
// before it left, counted 16 s later while their new owner has decided their
// partition all along: it placed them 30 s ahead, so they are still in the window, and
// their new owner must load them (before the skip waited for the stamps of the nodes
// that wrote a partition, it created them empty: since it had decided the partition
// for longer than the window plus 5 s, it took Redis to hold nothing in the window).
func TestClockOffsetIsMeasuredAndNothingIsLost(t *testing.T) {
	// ahead leaves the 10 s counters in their window 40 s after they were counted:
	// the graceful stop and the 16 s after it must fit (with 12 s ahead they had 6 s,
	// and under make test's load a stop once took longer, and found them expired).
	const ahead = 30 * time.Second
	rs := testredis.Start(t)
	c := nodetest.MakeCluster(t, 3, func(cfg *node.Config) {
		cfg.RedisURL, cfg.Now = rs.URL(), nil
		if cfg.Name == "node-2" || cfg.Name == "node-3" {
			cfg.TestClockOffset = ahead
		}
	})
	right, skewed := c.Nodes[0], c.Nodes[2]
	ctx := context.Background()

	near := func(got, want float64) bool { return got > want-0.5 && got < want+0.5 }
	wait.For(t, nodetest.Timeout, func() error {
		checks := []struct {
			n      *node.Node
			series string
			want   float64
		}{
			{skewed, `leapcount_clock_offset_seconds{against="redis"}`, -ahead.Seconds()},
			{skewed, `leapcount_clock_offset_seconds{against="node-0"}`, -ahead.Seconds()},
			{right, `leapcount_clock_offset_seconds{against="node-2"}`, ahead.Seconds()},
			{right, `leapcount_clock_offset_seconds{against="redis"}`, 0},
			{right, `leapcount_clock_offset_seconds{against="node-1"}`, 0},
		}
		for _, ck := range checks {
			text := metricsText(ck.n)
			if !strings.Contains(text, ck.series+" ") {
				return fmt.Errorf("%s: no %s yet", ck.n.Name(), ck.series)
			}
			if got := scrape(ck.n, ck.series); !near(got, ck.want) {
				return fmt.Errorf("%s: %s = %v; want %v", ck.n.Name(), ck.series, got, ck.want)
			}
		}
		return nil
	})
	t.Logf("measured: node-2 against redis %.3fs, against node-0 %.3fs; node-0 against node-2 %.3fs, against redis %.3fs",
		scrape(skewed, `leapcount_clock_offset_seconds{against="redis"}`), scrape(skewed, `leapcount_clock_offset_seconds{against="node-0"}`),
		scrape(right, `leapcount_clock_offset_seconds{against="node-2"}`), scrape(right, `leapcount_clock_offset_seconds{against="redis"}`))
	wait.For(t, nodetest.Timeout, func() error {
		for n, want := range map[*node.Node]string{skewed: "node-2's counters' clock is 30s ahead of Redis's", right: "member node-2's counters' clock is 30s ahead of node-0's"} {
			var st node.StatusView
			if err := getJSON(n, "/v1/status", &st); err != nil {
				return err
			}
			if !slices.ContainsFunc(st.Problems, func(p string) bool { return strings.Contains(p, want) }) {
				return fmt.Errorf("%s's problems %q lack %q", n.Name(), st.Problems, want)
			}
		}
		return nil
	})

	// Counters of an hour's window through every move, and, in partitions the skewed
	// node owns, pairs of a 10 s window: k to count, keep to decide the partition by.
	acked := map[string]int64{}
	incr := func(key, window string, by int64) {
		t.Helper()
		if err := respClient(t, right).Do(ctx, "SW.INCR", key, window, "BY", by).Err(); err != nil {
			t.Fatalf("incr %s: %v", key, err)
		}
		acked[key] += by
	}
	for i := range 200 {
		incr(fmt.Sprintf("long:%d", i), "1h", int64(1+i%3))
	}
	var tags []string
	rg := right.Router().Ring()
	for i := 0; len(tags) < 20; i++ {
		tag := fmt.Sprintf("{c%d}", i)
		if m, _ := rg.Owner(tag + "k"); m.Name == skewed.Name() {
			tags = append(tags, tag)
		}
	}
	for _, tag := range tags {
		incr(tag+"k", "10s", 3)
	}
	loaded, skipped := scrape(skewed, "leapcount_redis_loads_total"), scrape(skewed, "leapcount_redis_loads_skipped_total")
	if loaded == 0 || skipped != 0 {
		t.Errorf("the skewed node loaded %v counters and skipped %v; want loads and no skip", loaded, skipped)
	}

	if err := c.Stop(2); err != nil { // its partitions go to the others through Redis
		t.Fatal(err)
	}
	moved := time.Now()
	c.WaitConverged()
	keep := func() {
		for _, tag := range tags {
			if err := respClient(t, right).Do(ctx, "SW.INCR", tag+"keep", "10s").Err(); err != nil {
				t.Fatalf("incr %skeep: %v", tag, err)
			}
		}
	}
	for time.Since(moved) < 16*time.Second {
		keep()
		time.Sleep(300 * time.Millisecond)
	}
	cl := respClient(t, right)
	for _, tag := range tags {
		if got, err := cl.Do(ctx, "SW.COUNT", tag+"k", "10s").Int64(); err != nil || got != 3 {
			t.Errorf("%sk 16 s after its partition moved from the node 30 s ahead: %d, %v; want 3", tag, got, err)
		}
	}

	for i := range 200 {
		incr(fmt.Sprintf("long:%d", i), "1h", 1)
	}
	back := c.Add() // node-3, 30 s ahead too: partitions move to it
	c.WaitConverged()
	for i := range 200 {
		incr(fmt.Sprintf("long:%d", i), "1h", 1)
	}
	for i := range 200 {
		key := fmt.Sprintf("long:%d", i)
		if got, err := cl.Do(ctx, "SW.COUNT", key, "1h").Int64(); err != nil || got != acked[key] {
			t.Errorf("%s after moves to and from the skewed clock: %d, %v; want %d acknowledged", key, got, err, acked[key])
		}
	}
	if loaded, skipped := scrape(back, "leapcount_redis_loads_total"), scrape(back, "leapcount_redis_loads_skipped_total"); loaded == 0 || skipped != 0 {
		t.Errorf("the skewed node that joined loaded %v counters and skipped %v; want loads and no skip", loaded, skipped)
	}
}
