package owner

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/testkit/fallbacktest"
)

// batchSizes records the counters of every batch an owner makes.
type batchSizes struct {
	Redis
	mu    sync.Mutex
	sizes []int
}

func (b *batchSizes) NewBatch(writer string, ds []fallback.Delta) Batch {
	b.mu.Lock()
	b.sizes = append(b.sizes, len(ds))
	b.mu.Unlock()
	return b.Redis.NewBatch(writer, ds)
}

// Write-behind of more counters than a batch holds goes in several batches, none of
// more than DefaultFlushBatch counters, and every count reaches Redis: what write-behind
// holds outside the store is bounded however many counters wait.
func TestWriteBehindGoesInBoundedBatches(t *testing.T) {
	_, st := startRedis(t)
	sizes := &batchSizes{}
	n := net{wrap: func(r Redis) Redis { sizes.Redis = r; return sizes }}
	a := n.sole(t, "a", st)
	keys := make([]string, 2*DefaultFlushBatch+DefaultFlushBatch/3)
	ops := make([]counter.Op, len(keys))
	for i := range keys {
		keys[i] = fmt.Sprint("wb:", i)
		ops[i] = incr(keys[i], int64(i%5+1))
	}
	for i, r := range do(a.Owner, ops...) {
		if r.Err != nil {
			t.Fatalf("incr %s: %v", keys[i], r.Err)
		}
	}
	eventually(t, "every count in Redis", func() error {
		for i := len(keys) - 1; i >= 0; i-- { // (the last keys are the likeliest to lag)
			got, err := fallbacktest.Count(context.Background(), st, keys[i], sp, t0)
			if err != nil || got != int64(i%5+1) {
				return fmt.Errorf("%s: got %d, %v; want %d", keys[i], got, err, i%5+1)
			}
		}
		return nil
	})
	sizes.mu.Lock()
	defer sizes.mu.Unlock()
	total := 0
	for _, n := range sizes.sizes {
		if n > DefaultFlushBatch {
			t.Fatalf("a batch of %d counters; the bound is %d (batches: %v)", n, DefaultFlushBatch, sizes.sizes)
		}
		total += n
	}
	if total != len(keys) || len(sizes.sizes) < 3 {
		t.Fatalf("batches %v: %d counters in all; want %d, in at least 3 batches", sizes.sizes, total, len(keys))
	}
}
