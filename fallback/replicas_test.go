package fallback

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
)

// A failover to a replica that lagged loses writes the master had confirmed, unseen
// (the stamps' epoch is the replica's copy, unchanged). With WaitReplicas a write that
// no replica acknowledged stays in doubt; sent again after the failover, it applies on
// the new data: nothing confirmed is lost, nothing counts twice.
func TestWritesConfirmedOnReplicasSurviveAFailover(t *testing.T) {
	sp := spec(10_000, 10)
	now := int64(1_700_000_000_000)
	for _, wait := range []int{0, 1} {
		master, replica := testredis.StartReplicated(t)
		st := open(t, master.URL(), Config{WaitReplicas: wait, WaitTimeout: 200 * time.Millisecond})
		first := batchDeltas("first", 3, sp, now)
		if err := st.SendBatch(bg, st.NewBatch("w", first)); err != nil {
			t.Fatalf("wait %d: the first batch, replica in sync: %v", wait, err)
		}
		testredis.Poll(t, 10*time.Second, "the first batch on the replica", func() error {
			for _, d := range first {
				if replica.Client(t).Exists(bg, counterKey(d.Key, d.Spec)).Val() != 1 {
					return errors.New(d.Key + " missing")
				}
			}
			return nil
		})
		replica.Do(t, "REPLICAOF", "NO", "ONE") // it stops following: it lags from here
		second := batchDeltas("second", 3, sp, now)
		b := st.NewBatch("w", second)
		err := st.SendBatch(bg, b)
		if wait == 0 {
			if err != nil || !b.Confirmed() {
				t.Fatalf("wait 0: %v, confirmed %v; want confirmed by the master alone", err, b.Confirmed())
			}
			testredis.FailOverToStale(t, master, replica)
			wantCounts(t, st, first, now, "wait 0, after the failover")
			if c := countsOf(st, second, now); c[0] != 0 || c[2] != 0 {
				t.Fatalf("wait 0: the confirmed second batch counts %v after the failover; this test wants it lost (else it shows nothing)", c)
			}
			continue
		}
		if err == nil || b.Confirmed() || !b.InDoubt() || !errors.Is(err, counter.ErrUnavailable) || !strings.Contains(err.Error(), "replicas") {
			t.Fatalf("wait 1, no replica: %v, confirmed %v, in doubt %v; want in doubt, unavailable, naming the replicas", err, b.Confirmed(), b.InDoubt())
		}
		testredis.FailOverToStale(t, master, replica)
		if err := st.SendBatch(bg, b); err != nil || !b.Confirmed() {
			t.Fatalf("wait 1: sent again after the failover: %v, confirmed %v", err, b.Confirmed())
		}
		wantCounts(t, st, first, now, "wait 1, after the failover")
		wantCounts(t, st, second, now, "wait 1, the second batch sent again")
		loseReplies(b)
		if err := st.SendBatch(bg, b); err != nil || !b.Confirmed() {
			t.Fatalf("wait 1: sent a third time: %v, confirmed %v", err, b.Confirmed())
		}
		wantCounts(t, st, second, now, "wait 1, sent a third time")
	}
}

// A call found applied before (its reply was lost) is confirmed only once a replica has
// what it applied, even when sent again on a connection whose last write came before it
// (WAIT waits for the connection's own last write).
func TestCallFoundAppliedIsConfirmedOnlyOnceReplicated(t *testing.T) {
	master, replica := testredis.StartReplicated(t)
	sp := spec(10_000, 10)
	now := int64(1_700_000_000_000)
	cfg := Config{WaitReplicas: 1, WaitTimeout: 200 * time.Millisecond}
	st := open(t, master.URL(), cfg)
	other := open(t, master.URL(), cfg) // its connections' last writes come before the batch
	if err := st.SendBatch(bg, st.NewBatch("w", batchDeltas("warm", 1, sp, now))); err != nil {
		t.Fatalf("a batch with the replica in sync: %v", err) // the replica has acknowledged all so far
	}
	replica.Pause() // connected, acknowledging nothing
	b := st.NewBatch("w", batchDeltas("a", 2, sp, now))
	if err := st.SendBatch(bg, b); err == nil || b.Confirmed() {
		t.Fatalf("replica paused: %v, confirmed %v; want in doubt", err, b.Confirmed())
	}
	if err := other.SendBatch(bg, b); err == nil || b.Confirmed() {
		t.Fatalf("sent again on another connection, replica still paused: %v, confirmed %v; want in doubt", err, b.Confirmed())
	}
	replica.Resume()
	testredis.Poll(t, 10*time.Second, "the batch confirmed once the replica is back", func() error {
		return other.SendBatch(bg, b)
	})
	wantCounts(t, st, batchDeltas("a", 2, sp, now), now, "after the replica caught up")
}

// A fence is reached only once its call is on the replicas: a call applied on the
// master alone (a failover could lose it, and its writer would send it again) does not
// let the node holding its counters read them back from Redis (sim seed 19178: it did,
// the master failed over to a replica without the call, and the counter came back one
// short, which admitted one past its limit).
func TestFenceReachedOnlyOnceReplicated(t *testing.T) {
	master, replica := testredis.StartReplicated(t)
	sp := spec(10_000, 10)
	now := int64(1_700_000_000_000)
	st := open(t, master.URL(), Config{WaitReplicas: 1, WaitTimeout: 200 * time.Millisecond})
	if err := st.SendBatch(bg, st.NewBatch("w", batchDeltas("warm", 1, sp, now))); err != nil {
		t.Fatalf("a batch with the replica in sync: %v", err)
	}
	replica.Pause()
	b := st.NewBatch("w", batchDeltas("a", 2, sp, now))
	if err := st.SendBatch(bg, b); err == nil || b.Confirmed() {
		t.Fatalf("replica paused: %v, confirmed %v; want in doubt", err, b.Confirmed())
	}
	fences := b.Fences(func(Delta) bool { return true })
	if len(fences) == 0 {
		t.Fatal("a batch in doubt has no fence")
	}
	if ok, err := st.Reached(bg, fences); ok || err != nil {
		t.Fatalf("fence of a call applied on the master only: reached %v, %v; want not reached", ok, err)
	}
	replica.Resume()
	testredis.Poll(t, 10*time.Second, "the fence reached once the replica has the call", func() error {
		if ok, err := st.Reached(bg, fences); !ok || err != nil {
			return fmt.Errorf("reached %v, %v", ok, err)
		}
		return nil
	})
}

// Stamps and late marks wait for the replicas too; while a write finds too few, the
// store is taken as down (its calls still go to Redis) until one finds them again; a
// store that cannot wait says why.
func TestWaitReplicasSettings(t *testing.T) {
	master, replica := testredis.StartReplicated(t)
	st := open(t, master.URL(), Config{WaitReplicas: 1, WaitTimeout: 200 * time.Millisecond})
	if _, err := st.StampWritten(bg, 16, []int{3}, 1000, "e1"); err != nil {
		t.Fatalf("stamp, replica in sync: %v", err)
	}
	if err := st.MarkLate(bg, 16, []int{3}); err != nil {
		t.Fatalf("late mark, replica in sync: %v", err)
	}
	replica.Pause()
	if _, err := st.StampWritten(bg, 16, []int{4}, 1000, "e1"); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("stamp, replica paused: %v; want ErrNotReplicated", err)
	}
	if err := st.MarkLate(bg, 16, []int{4}); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("late mark, replica paused: %v; want ErrNotReplicated", err)
	}
	if st.Healthy() || !st.ReplicasBehind() {
		t.Fatalf("no replica acknowledges: healthy %v, replicas behind %v; want taken as down, replicas behind", st.Healthy(), st.ReplicasBehind())
	}
	if _, err := st.Count(bg, "k", spec(10_000, 10), 1000); err != nil {
		t.Fatalf("a read while replicas are behind: %v; want it answered (calls still go to Redis)", err)
	}
	replica.Resume()
	testredis.Poll(t, 10*time.Second, "a write acknowledged again", func() error {
		_, err := st.StampWritten(bg, 16, []int{5}, 1000, "e1")
		return err
	})
	if !st.Healthy() || st.ReplicasBehind() {
		t.Fatalf("a write acknowledged again: healthy %v, replicas behind %v; want healthy", st.Healthy(), st.ReplicasBehind())
	}
	for _, bad := range []struct {
		cfg  Config
		want string
	}{
		{Config{WaitReplicas: -1}, "WaitReplicas -1"},
		{Config{WaitReplicas: 1, ReadTimeout: time.Second, WaitTimeout: time.Second}, "below the read timeout"},
	} {
		if bad.cfg.URL == "" {
			bad.cfg.URL = master.URL()
		}
		bad.cfg.Lazy = true
		_, err := Open(bg, bad.cfg)
		if !errors.Is(err, counter.ErrBadArgument) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Open(%+v): %v; want ErrBadArgument naming %q", bad.cfg, err, bad.want)
		}
	}
}

// On a Cluster each master's calls go in a pipeline of their own with its WAIT: the
// calls on a master whose replica does not acknowledge stay in doubt, the others are
// confirmed, and sent again once it does, each applies once.
func TestClusterWritesWaitForEachMastersReplica(t *testing.T) {
	masters, replicas := testredis.StartClusterReplicated(t, 3)
	st := open(t, testredis.ClusterURL(masters), Config{WaitReplicas: 1, WaitTimeout: 200 * time.Millisecond, FlushKeys: 4})
	sp := spec(10_000, 10)
	now := int64(1_700_000_000_000)
	deltas := batchDeltas("spread", 40, sp, now) // over every master's slots
	if err := st.SendBatch(bg, st.NewBatch("w", deltas)); err != nil {
		t.Fatalf("every replica in sync: %v", err)
	}
	replicas[1].Pause()
	b := st.NewBatch("w", deltas)
	err := st.SendBatch(bg, b)
	if err == nil || b.Confirmed() || !b.InDoubt() || !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("a replica paused: %v, confirmed %v, in doubt %v; want some calls in doubt, not replicated", err, b.Confirmed(), b.InDoubt())
	}
	var fe *FlushError
	if !errors.As(err, &fe) || len(fe.Failed) == 0 || len(fe.Failed) == len(deltas) {
		t.Fatalf("a replica paused: %v; want the deltas of one master of three unconfirmed, not none or all", err)
	}
	replicas[1].Resume()
	testredis.Poll(t, 10*time.Second, "the batch confirmed once the replica is back", func() error {
		return st.SendBatch(bg, b)
	})
	for i, c := range countsOf(st, deltas, now) {
		if want := 2 * int64(i+1); c != want {
			t.Fatalf("%s counts %d; want %d (two batches, each once)", deltas[i].Key, c, want)
		}
	}
}

// A store whose last write found too few replicas finds them back by ProbeReplicas,
// with no write of its own to make: on one server, and on each master of a Cluster.
func TestProbeFindsReplicasBack(t *testing.T) {
	t.Run("one server", func(t *testing.T) {
		master, replica := testredis.StartReplicated(t)
		st := open(t, master.URL(), Config{WaitReplicas: 1, WaitTimeout: 200 * time.Millisecond})
		probeAfterPause(t, st, replica)
	})
	t.Run("cluster", func(t *testing.T) {
		masters, replicas := testredis.StartClusterReplicated(t, 3)
		st := open(t, testredis.ClusterURL(masters), Config{WaitReplicas: 1, WaitTimeout: 200 * time.Millisecond})
		probeAfterPause(t, st, replicas[2])
	})
}

// probeAfterPause makes st's writes miss replica, then checks that a probe keeps st
// unhealthy while the replica is paused and makes it healthy once it follows again.
func probeAfterPause(t *testing.T, st *Store, replica *testredis.Server) {
	t.Helper()
	if err := st.ProbeReplicas(bg, 1); err != nil || !st.Healthy() {
		t.Fatalf("a probe with the replicas in sync: %v, healthy %v; want nothing done, healthy", err, st.Healthy())
	}
	replica.Pause()
	deltas := batchDeltas("probe", 40, spec(10_000, 10), 1_700_000_000_000) // over every master's slots
	if err := st.SendBatch(bg, st.NewBatch("w", deltas)); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("a write, replica paused: %v; want ErrNotReplicated", err)
	}
	if err := st.ProbeReplicas(bg, 2); !errors.Is(err, ErrNotReplicated) || st.Healthy() {
		t.Fatalf("a probe, replica paused: %v, healthy %v; want ErrNotReplicated, unhealthy", err, st.Healthy())
	}
	replica.Resume()
	testredis.Poll(t, 10*time.Second, "a probe finds the replica back", func() error { return st.ProbeReplicas(bg, 3) })
	if !st.Healthy() || st.ReplicasBehind() {
		t.Fatalf("after the probe: healthy %v, replicas behind %v; want healthy", st.Healthy(), st.ReplicasBehind())
	}
}
