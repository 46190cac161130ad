package owner

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/internal/testkit/fallbacktest"
)

// A node whose lease of a partition lapsed while its write of a counter of it was in
// doubt does not send that write again once Redis lost its data: the write applied, the
// next owner loaded the counter with it and writes its memory back in full, and the
// record that makes a call apply once went with Redis's data (sim seed 59258: an
// increment key counted two increments twice).
func TestWriteInDoubtOfALapsedPartitionIsNotSentAgainAfterRedisLostItsData(t *testing.T) {
	srv, st, a, b, cut, k := sixthInDoubtOfTwo(t)
	p := ringOf("a").Partition(k)
	a.lapse(p) // the next owner may load the counter now
	cut.cut.Store(true)
	srv.Resume()
	redisIs(t, st, k, 6) // the call in doubt applied as Redis came back
	b.SetRing(ringOf("b"))
	b.leases.grantAll()
	countIs(t, b.Owner, k, 6)
	do(b.Owner, incr("b's own", 1))
	b.flushOnce(context.Background()) // b writes, and knows Redis's epoch

	emptyRedisWhileInDoubt(t, srv, a, cut)
	writesUntil(t, "b writes its memory back in full", b.Owner, st, k, 6, "")
	eventually(t, "a settles its write in doubt", func() error {
		a.flushOnce(context.Background())
		if a.InDoubt() {
			return errors.New("still in doubt")
		}
		return nil
	})
	if got := redisCount(t, st, k); got != 6 {
		t.Fatalf("Redis counts %d after a's flush; want 6 (a's write in doubt counted twice)", got)
	}
}

// heldRedis refuses write-behind, unsent, while hold is set; reads, stamps and marks go.
type heldRedis struct {
	Redis
	hold atomic.Bool
}

func (h *heldRedis) SendBatch(b Batch, done func(error)) {
	if h.hold.Load() {
		go done(errCut)
		return
	}
	h.Redis.SendBatch(b, done)
}

// An owner's write-back in full after Redis lost its data does not erase another node's
// write that landed late meanwhile: once the late write's mark shows its memory stale,
// the whole state it had queued does not go (its memory lacks the late write, and the
// write-back's reset would erase it), and its counter is reloaded. What Redis held
// before the loss is lost then, as docs/guarantees.md says of an owner whose memory
// went stale before its write-back; the late write is not (sim seed 46060: an increment
// key lost two increments more than that).
func TestAWriteBackInFullDoesNotEraseALateWrite(t *testing.T) {
	srv := startRedisServer(t)
	relay := srv.Relay(t)
	stA := openStore(t, relay.URL(), fallback.Config{})
	stB := openStore(t, srv.URL(), fallback.Config{})
	var held *heldRedis
	n := net{flush: time.Hour} // each writes when the test says
	a := n.sole(t, "a", stA)
	n.wrap = func(r Redis) Redis {
		held = &heldRedis{Redis: r}
		return held
	}
	b := n.add(t, "b", stB)
	k := "late"
	p := ringOf("a").Partition(k)

	do(a.Owner, incr(k, 5))
	a.flushOnce(context.Background())
	redisIs(t, stB, k, 5)
	relay.Cut()
	mustCount(t, a.Owner, k, 5)
	if r := do(a.Owner, incr(k, 2))[0]; r.Err != nil || r.Count != 7 {
		t.Fatalf("incr on a, cut off from Redis: got %+v; want count 7", r)
	}
	a.lapse(p) // its lease runs out with 2 not in Redis

	b.SetRing(ringOf("b"))
	b.leases.grantAll()
	if r := do(b.Owner, incr(k, 1))[0]; r.Err != nil || r.Count != 6 {
		t.Fatalf("incr on b: got %+v; want count 6 (what Redis had, and 1)", r)
	}
	b.flushOnce(context.Background())
	redisIs(t, stB, k, 6)

	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	if err := rc.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	held.hold.Store(true)
	if r := do(b.Owner, incr(k, 1))[0]; r.Err != nil || r.Count != 7 {
		t.Fatalf("incr on b after the loss: got %+v; want count 7", r)
	}
	eventually(t, "b sees Redis lost its data", func() error {
		b.Tick()
		if b.RedisLosses() == 0 {
			return errors.New("not yet")
		}
		return nil
	})

	relay.Heal()
	eventually(t, "a's late write", func() error {
		a.flushOnce(context.Background())
		if got, err := fallbacktest.Count(context.Background(), stB, k, sp, t0); err != nil || got != 2 {
			return fmt.Errorf("Redis counts %d, %v; want 2", got, err)
		}
		return nil
	})
	polls := b.LatePolls()
	eventually(t, "b reads the late write's mark", func() error {
		b.Tick()
		if b.LatePolls() < polls+2 { // one that began after the mark
			return errors.New("not yet")
		}
		return nil
	})
	held.hold.Store(false)
	// a's 2 and b's last 1; b's 6 went with Redis's data.
	writesUntil(t, "b's write-behind", b.Owner, stB, k, 3, "7 when the write-back erased a's late write")
	countIs(t, b.Owner, k, 3)
}

// writesUntil has o write behind (its Tick too, which finds Redis emptied) until Redis
// counts want of k; why, when set, says what another count would mean.
func writesUntil(t *testing.T, what string, o *Owner, st *fallback.Store, k string, want int64, why string) {
	t.Helper()
	eventually(t, what, func() error {
		o.Tick()
		o.flushOnce(context.Background())
		got, err := fallbacktest.Count(context.Background(), st, k, sp, t0)
		if err == nil && got != want {
			err = fmt.Errorf("Redis counts %d; want %d %s", got, want, why)
		}
		return err
	})
}
