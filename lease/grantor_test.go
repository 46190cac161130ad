package lease

import (
	"testing"
	"time"
)

const ms = time.Millisecond

func claim(n int, ps ...int) Set {
	s := NewSet(n)
	for _, p := range ps {
		s.Add(p)
	}
	return s
}

func TestGrantorExclusive(t *testing.T) {
	cfg := Config{Duration: time.Second}.WithDefaults()
	g := NewGrantor(cfg, 8, 0, false)
	a := &Request{From: "a", Incarnation: 1, Claims: claim(8, 1, 2)}
	b := &Request{From: "b", Incarnation: 1, Claims: claim(8, 2, 3)}
	if r := g.Grant(a, true, 0); r.Granted.Len() != 2 {
		t.Fatalf("a granted %d partitions; want 2", r.Granted.Len())
	}
	r := g.Grant(b, true, 10*ms)
	if r.Granted.Has(2) || !r.Granted.Has(3) {
		t.Fatalf("b granted 2=%v 3=%v; want only 3 (a holds 2)", r.Granted.Has(2), r.Granted.Has(3))
	}
	hold := cfg.hold()
	if r := g.Grant(b, true, hold-1); r.Granted.Has(2) {
		t.Fatalf("b granted 2 at %dns, before a's grant (given at 0) ran out at %d", hold-1, hold)
	}
	if r := g.Grant(b, true, hold); !r.Granted.Has(2) {
		t.Fatalf("b not granted 2 once a's grant ran out")
	}
	if got := g.Holder(2, hold); got != "b" {
		t.Fatalf("holder of 2: got %q; want b", got)
	}
}

func TestGrantorRenewDropAndIncarnation(t *testing.T) {
	cfg := Config{Duration: time.Second}.WithDefaults()
	g := NewGrantor(cfg, 4, 0, false)
	a := &Request{From: "a", Incarnation: 1, Claims: claim(4, 0)}
	g.Grant(a, true, 0)
	g.Grant(a, true, 900*ms) // renewal extends
	b := &Request{From: "b", Incarnation: 1, Claims: claim(4, 0)}
	if r := g.Grant(b, true, cfg.hold()+ms); r.Granted.Has(0) {
		t.Fatal("b granted 0 though a renewed at 900ms")
	}
	a2 := &Request{From: "a", Incarnation: 2, Claims: claim(4, 0)}
	if r := g.Grant(a2, true, 1000*ms); r.Granted.Has(0) {
		t.Fatal("a restarted (incarnation 2) granted 0 while its earlier run holds it")
	}
	rel := &Request{From: "a", Incarnation: 1, Drops: claim(4, 0)}
	g.Grant(rel, true, 1100*ms)
	if r := g.Grant(b, true, 1100*ms); !r.Granted.Has(0) {
		t.Fatal("b not granted 0 after a dropped it")
	}
	// A drop by someone who does not hold it changes nothing.
	g.Grant(&Request{From: "c", Incarnation: 1, Drops: claim(4, 0)}, true, 1200*ms)
	if got := g.Holder(0, 1200*ms); got != "b" {
		t.Fatalf("holder after a stranger's drop: got %q; want b", got)
	}
}

func TestGrantorRefusals(t *testing.T) {
	cfg := Config{Duration: time.Second}.WithDefaults()
	g := NewGrantor(cfg, 4, 0, true)
	a := &Request{From: "a", Incarnation: 1, Claims: claim(4, 0)}
	if r := g.Grant(a, true, cfg.hold()-1); r.Refused != RefusedStarting || r.Granted.Len() != 0 {
		t.Fatalf("quarantined grantor: refused %d, granted %d; want RefusedStarting, 0", r.Refused, r.Granted.Len())
	}
	if r := g.Grant(a, false, cfg.hold()); r.Refused != RefusedNotMember {
		t.Fatalf("non-voter: refused %d; want RefusedNotMember", r.Refused)
	}
	bad := &Request{From: "a", Incarnation: 1, Claims: claim(128, 100)}
	if r := g.Grant(bad, true, cfg.hold()); r.Refused != RefusedWrongShape {
		t.Fatalf("claims of another partition count: refused %d; want RefusedWrongShape", r.Refused)
	}
	if r := g.Grant(a, true, cfg.hold()); r.Refused != RefusedNone || !r.Granted.Has(0) {
		t.Fatalf("after quarantine: refused %d, granted 0=%v; want granted", r.Refused, r.Granted.Has(0))
	}
}

func TestHolderNeedsMajority(t *testing.T) {
	cfg := Config{Duration: time.Second}.WithDefaults()
	h := NewHolder(cfg, 4)
	h.Begin(1, 100*ms, []string{"a", "b", "c"})
	h.Grant(1, "a", claim(4, 0, 1))
	if h.Until(0) != 0 {
		t.Fatal("held after one grant of three voters")
	}
	h.Grant(1, "a", claim(4, 0, 1)) // a repeated answer counts once
	h.Grant(1, "x", claim(4, 0, 1)) // not a voter
	if h.Until(0) != 0 {
		t.Fatal("held after a repeated answer and a non-voter's grant")
	}
	h.Grant(1, "b", claim(4, 0))
	if got, want := h.Until(0), 100*ms+time.Second; got != want {
		t.Fatalf("until: got %d; want %d (send time + Duration)", got, want)
	}
	if h.Until(1) != 0 {
		t.Fatal("partition 1 held with one grant")
	}
	if got, want := h.DecideUntil(0), h.Until(0)-cfg.Grace; got != want {
		t.Fatalf("DecideUntil: got %d; want %d", got, want)
	}
	h.Begin(2, 200*ms, []string{"a", "b", "c"})
	h.Drop(0, 3)
	h.Grant(2, "a", claim(4, 0))
	h.Grant(2, "c", claim(4, 0))
	if h.Until(0) != 0 {
		t.Fatal("a round sent before Drop renewed the lease")
	}
	h.Expire(200*ms + time.Second)
	if len(h.rounds) != 0 {
		t.Fatalf("%d rounds kept after they expired", len(h.rounds))
	}
}

// TestGrantorIgnoresAnOvertakenDrop: a round that drops p, delivered after a newer
// round of the same sender that claimed p again, must not end the newer grant: the
// sender holds p by the newer round, and a grantor that forgot it would grant p to
// another node meanwhile.
func TestGrantorIgnoresAnOvertakenDrop(t *testing.T) {
	cfg := Config{Duration: time.Second}.WithDefaults()
	g := NewGrantor(cfg, 4, 0, false)
	g.Grant(&Request{From: "a", Incarnation: 1, Round: 1, Claims: claim(4, 0)}, true, 0)
	drop := &Request{From: "a", Incarnation: 1, Round: 2, Claims: claim(4), Drops: claim(4, 0)}
	reclaim := &Request{From: "a", Incarnation: 1, Round: 3, Claims: claim(4, 0)}
	if r := g.Grant(reclaim, true, 20*ms); !r.Granted.Has(0) {
		t.Fatal("a not granted 0 in round 3")
	}
	g.Grant(drop, true, 30*ms) // round 2 arrives late
	if r := g.Grant(&Request{From: "b", Incarnation: 1, Round: 1, Claims: claim(4, 0)}, true, 40*ms); r.Granted.Has(0) {
		t.Fatal("b granted 0 while a holds it by round 3: the overtaken round 2 ended a's grant")
	}
	if got := g.Holder(0, 40*ms); got != "a" {
		t.Fatalf("holder of 0: %q; want a", got)
	}
	// Another run of a is not stale: it starts its rounds again from 1.
	if r := g.Grant(&Request{From: "a", Incarnation: 2, Round: 1, Claims: claim(4, 1)}, true, 50*ms); !r.Granted.Has(1) {
		t.Fatal("a's next run refused as stale")
	}
}

// TestGrantorForgetsSilentSenders: the rounds remembered per sender stay bounded by the
// senders heard from recently.
func TestGrantorForgetsSilentSenders(t *testing.T) {
	g := NewGrantor(Config{Duration: time.Second}, 4, 0, false)
	for i := 0; i < 100; i++ {
		g.Grant(&Request{From: string(rune('a'+i%26)) + string(rune('a'+i/26)), Incarnation: 1, Round: 1}, true, time.Duration(i)*ms)
	}
	g.Forget(50 * ms)
	if len(g.latest) != 50 {
		t.Fatalf("%d senders remembered after forgetting those silent before 50ms; want 50", len(g.latest))
	}
}
