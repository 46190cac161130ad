package node_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/internal/testredis"
	"github.com/leapcount/leapcount/internal/wait"
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
