package lease

import (
	"testing"
	"time"
)

// A heartbeat and its reply carry the two nodes' counters' clocks, and the sender
// measures the grantor's against its own as NTP does: b's clock 8 s ahead of a's,
// 10 ms each way. The measure is known for offsetKnownFor, taken only from a member it
// knows, only when both clocks are there, and only from an exchange quick enough.
func TestHeartbeatsMeasureClockOffsets(t *testing.T) {
	var trueMs int64 = 1_700_000_000_000
	const ahead = 8000
	mono := funcClock(func() time.Duration { return time.Duration(trueMs-1_700_000_000_000+1) * time.Millisecond })
	cfg := Config{Duration: time.Second}
	a := NewKeeper(KeeperConfig{Config: cfg, Self: "a", Incarnation: 1, Partitions: 4, Found: true, Clock: mono,
		Wall: func() int64 { return trueMs }})
	b := NewKeeper(KeeperConfig{Config: cfg, Self: "b", Incarnation: 1, Partitions: 4, Clock: mono,
		Wall: func() int64 { return trueMs + ahead }})
	noClock := NewKeeper(KeeperConfig{Config: cfg, Self: "c", Incarnation: 1, Partitions: 4, Clock: mono})
	view := View{Alive: []string{"a", "b", "c"}}
	peers := []Peer{{Name: "a", Addr: "a"}, {Name: "b", Addr: "b"}, {Name: "c", Addr: "c"}}
	for _, k := range []*Keeper{a, b, noClock} {
		k.SetView(view, peers)
	}
	exchange := func(from, to *Keeper, name string, there, back int64) {
		req, _ := from.Begin()
		trueMs += there
		rep := to.Handle(req)
		trueMs += back
		from.Absorb(name, req, rep)
	}

	exchange(a, b, "b", 10, 10)
	got, ok := a.ClockOffsets()["b"]
	if !ok || got.Offset != ahead*time.Millisecond || got.Err != 10*time.Millisecond {
		t.Fatalf("a's view of b: %+v (known %v); want +8s within 10ms", got, ok)
	}
	exchange(b, a, "a", 30, 2) // slower there than back: off by 14 ms, within the bound
	if got := b.ClockOffsets()["a"]; got.Offset != (-ahead+14)*time.Millisecond || got.Err != 16*time.Millisecond {
		t.Fatalf("b's view of a: %+v; want -7.986s within 16ms", got)
	}

	exchange(a, noClock, "c", 1, 1)
	if _, ok := a.ClockOffsets()["c"]; ok {
		t.Fatal("a measured c, whose heartbeats carry no clock")
	}
	exchange(noClock, a, "a", 1, 1)
	if len(noClock.ClockOffsets()) != 0 {
		t.Fatal("c, with no clock of its own, measured a")
	}
	exchange(a, b, "stranger", 1, 1)
	if _, ok := a.ClockOffsets()["stranger"]; ok {
		t.Fatal("a kept the offset of a member it does not know")
	}

	// A slow exchange says too little: the last good one stays, until it expires.
	trueMs += 1000
	exchange(a, b, "b", 400, 400)
	if got := a.ClockOffsets()["b"]; got.Err != 10*time.Millisecond {
		t.Fatalf("after a slow exchange: %+v; want the earlier one kept", got)
	}
	trueMs += offsetKnownFor.Milliseconds() - 1000
	if _, ok := a.ClockOffsets()["b"]; ok {
		t.Fatalf("b's offset still known %v after it was measured", offsetKnownFor)
	}
}
