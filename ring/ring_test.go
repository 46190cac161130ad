package ring

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/buraksezer/consistent"

	"github.com/leapcount/leapcount/hashslot"
)

func members(n int) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{Name: fmt.Sprintf("node-%d", i), RPCAddr: fmt.Sprintf("10.0.0.%d:7947", i)}
	}
	return ms
}

func TestOwnerIndependentOfOrder(t *testing.T) {
	ms := members(7)
	want := New(ms, Config{})
	rev := slices.Clone(ms)
	slices.Reverse(rev)
	got := New(rev, Config{})
	for p := range want.PartitionCount() {
		a, _ := want.PartitionOwner(p)
		b, _ := got.PartitionOwner(p)
		if a != b {
			t.Fatalf("partition %d: got owner %q; want %q", p, b.Name, a.Name)
		}
	}
	if got.Epoch() != want.Epoch() {
		t.Fatalf("got epoch %x; want %x", got.Epoch(), want.Epoch())
	}
}

// Names whose virtual-node strings collide ("a"+"10" and "a1"+"0") are the case where
// consistent's result depends on insertion order; New must hide it.
func TestOwnerIndependentOfOrderWithCollidingNames(t *testing.T) {
	ms := []Member{{Name: "a"}, {Name: "a1"}, {Name: "b"}}
	want := New(ms, Config{})
	got := New([]Member{ms[1], ms[2], ms[0]}, Config{})
	if moved := Moved(want, got); len(moved) != 0 {
		t.Fatalf("got %d partitions placed differently; want 0", len(moved))
	}
}

func TestOwnerMatchesConsistent(t *testing.T) {
	ms := members(5)
	r := New(ms, Consistent)
	cm := make([]consistent.Member, len(ms))
	for i, m := range ms {
		cm[i] = m
	}
	c := consistent.New(cm, consistent.Config{Hasher: hasher{}, PartitionCount: 4096, ReplicationFactor: 200, Load: 1.25})
	for i := range 2000 {
		key := fmt.Sprintf("user:%d", i)
		if gp, wp := r.Partition(key), int(hashslot.Of(key))/4; gp != wp {
			t.Fatalf("Partition(%q) = %d; want its slot / 4 = %d", key, gp, wp)
		}
		if first, last := r.SlotRange(r.Partition(key)); int(hashslot.Of(key)) < first || int(hashslot.Of(key)) > last || last-first != 3 {
			t.Fatalf("SlotRange(%d) = %d..%d; want the 4 slots holding %d", r.Partition(key), first, last, hashslot.Of(key))
		}
		got, ok := r.Owner(key)
		want := c.GetPartitionOwner(r.Partition(key)).(Member).Name
		if !ok || got.Name != want {
			t.Fatalf("Owner(%q) = %q, %v; want %q", key, got.Name, ok, want)
		}
		if b, _ := r.OwnerBytes([]byte(key)); b != got {
			t.Fatalf("OwnerBytes(%q) = %q; want %q", key, b.Name, got.Name)
		}
	}
}

func TestEpoch(t *testing.T) {
	base := New(members(3), Config{})
	cases := []struct {
		name  string
		ring  *Ring
		equal bool
	}{
		{"same set", New(members(3), Config{}), true},
		{"same set, defaults spelled out", New(members(3), Config{Placement: PlacementMatching, PartitionCount: 4096, Load: DefaultLoad}), true},
		{"same set, the old placement", New(members(3), Consistent), false},
		{"repeated member", New(append(members(3), members(3)[1]), Config{}), true},
		{"extra member", New(members(4), Config{}), false},
		{"fewer members", New(members(2), Config{}), false},
		{"other rpc addr", New(append(members(2), Member{Name: "node-2", RPCAddr: "10.0.0.9:7947"}), Config{}), false},
		{"other partition count", New(members(3), Config{PartitionCount: 512}), false},
		{"other load", New(members(3), Config{Load: 1.5}), false},
	}
	for _, c := range cases {
		if got := c.ring.Epoch() == base.Epoch(); got != c.equal {
			t.Errorf("%s: epoch equal = %v; want %v", c.name, got, c.equal)
		}
	}
	// Length prefixes keep name/address boundaries apart.
	a := New([]Member{{Name: "ab", RPCAddr: "c"}}, Config{})
	b := New([]Member{{Name: "a", RPCAddr: "bc"}}, Config{})
	if a.Epoch() == b.Epoch() {
		t.Errorf("epochs of {ab c} and {a bc} are equal")
	}
}

func TestMovedIsExactlyTheChangedPartitions(t *testing.T) {
	prev := New(members(4), Config{})
	next := New(members(5), Config{})
	moved := Moved(prev, next)
	var want []int
	for p := range prev.PartitionCount() {
		a, _ := prev.PartitionOwner(p)
		b, _ := next.PartitionOwner(p)
		if a.Name != b.Name {
			want = append(want, p)
		}
	}
	if !slices.Equal(moved, want) {
		t.Fatalf("got moved %v; want %v", moved, want)
	}
	if got := Moved(next, next); len(got) != 0 {
		t.Fatalf("Moved(r, r): got %d partitions; want 0", len(got))
	}
}

// With bounded loads a join does not only hand partitions to the newcomer: lowering
// the per-member cap can push partitions between old members too. What holds is that
// the newcomer gets every partition it owns by moving, and that far fewer partitions
// move than a rehash (hash mod N moves about N/(N+1) of them) would move.
func TestMovedOnJoin(t *testing.T) {
	for n := 1; n <= 20; n++ {
		prev := New(members(n), Config{})
		newcomer := Member{Name: "newcomer", RPCAddr: "10.0.1.1:7947"}
		next := New(append(members(n), newcomer), Config{})
		moved := Moved(prev, next)
		between := 0
		for _, p := range moved {
			if m, _ := next.PartitionOwner(p); m.Name != newcomer.Name {
				between++
			}
		}
		share := next.Shares()[newcomer.Name]
		if got := len(moved) - between; got != share {
			t.Errorf("n=%d: got %d partitions moved to the newcomer; want its share %d", n, got, share)
		}
		// The newcomer's bound, and an eighth of all partitions between old members.
		if limit := next.Config().MaxShare(n+1) + next.PartitionCount()/8; len(moved) > limit {
			t.Errorf("n=%d: got %d partitions moved; want at most %d", n, len(moved), limit)
		}
		t.Logf("n=%d: %d moved, %d to the newcomer, %d between old members", n, len(moved), share, between)
	}
}

func TestMovedOnLeave(t *testing.T) {
	prev := New(members(5), Config{})
	next := New(members(5)[1:], Config{})
	moved := Moved(prev, next)
	for p := range prev.PartitionCount() {
		if m, _ := prev.PartitionOwner(p); m.Name == "node-0" && !slices.Contains(moved, p) {
			t.Fatalf("partition %d of the leaver is not in Moved", p)
		}
	}
}

func TestMovedEdgeCases(t *testing.T) {
	r := New(members(3), Config{})
	if got, want := len(Moved(nil, r)), r.PartitionCount(); got != want {
		t.Errorf("Moved(nil, r): got %d; want %d", got, want)
	}
	if got, want := len(Moved(r, nil)), r.PartitionCount(); got != want {
		t.Errorf("Moved(r, nil): got %d; want %d", got, want)
	}
	if got, want := len(Moved(r, New(nil, Config{}))), r.PartitionCount(); got != want {
		t.Errorf("Moved(r, empty): got %d; want %d", got, want)
	}
	if got := Moved(nil, nil); len(got) != 0 {
		t.Errorf("Moved(nil, nil): got %d; want 0", len(got))
	}
	other := New(members(3), Config{PartitionCount: 7})
	if got, want := len(Moved(r, other)), 7; got != want {
		t.Errorf("Moved across partition counts: got %d; want %d", got, want)
	}
}

func TestBalanceWithinLoadBound(t *testing.T) {
	sizes := []int{2, 3, 5, 10, 50, 100, 271, 1000, 4096}
	if testing.Short() {
		sizes = sizes[:4] // the large rings are make test-long's: they take most of the time under -race
	}
	for _, cfg := range []Config{{}, Consistent} {
		for _, n := range sizes {
			if cfg.Placement == PlacementConsistent && n > 271 {
				continue // consistent rebuilds its ring per member added: quadratic time
			}
			r := New(members(n), cfg)
			if r.Err() != nil {
				t.Fatalf("%v n=%d: %v", cfg.Placement, n, r.Err())
			}
			bound := r.Config().MaxShare(n)
			total := 0
			for name, s := range r.Shares() {
				if s > bound {
					t.Errorf("n=%d: %s owns %d partitions; want at most %d", n, name, s, bound)
				}
				total += s
			}
			if total != r.PartitionCount() {
				t.Errorf("n=%d: shares sum to %d; want %d", n, total, r.PartitionCount())
			}
		}
	}
}

func TestZeroMembers(t *testing.T) {
	for _, ms := range [][]Member{nil, {}, {{Name: ""}}} {
		r := New(ms, Config{})
		if _, ok := r.Owner("k"); ok {
			t.Errorf("%v: Owner ok = true; want false", ms)
		}
		if _, ok := r.PartitionOwner(0); ok {
			t.Errorf("%v: PartitionOwner ok = true; want false", ms)
		}
		if !errors.Is(r.Err(), ErrNoMembers) {
			t.Errorf("%v: Err = %v; want ErrNoMembers", ms, r.Err())
		}
		if got := len(r.Shares()); got != 0 {
			t.Errorf("%v: got %d shares; want 0", ms, got)
		}
	}
}

func TestOneMember(t *testing.T) {
	only := Member{Name: "solo", RPCAddr: "127.0.0.1:7947"}
	r := New([]Member{only}, Config{})
	for i := range 100 {
		if m, ok := r.Owner(fmt.Sprint(i)); !ok || m != only {
			t.Fatalf("Owner(%d) = %v, %v; want %v, true", i, m, ok, only)
		}
	}
	if got, want := r.Shares()["solo"], r.PartitionCount(); got != want {
		t.Fatalf("got share %d; want %d", got, want)
	}
}

func TestUnplaceableNeverPanics(t *testing.T) {
	cases := []struct {
		name    string
		members int
		cfg     Config
		field   string
	}{
		{"more members than partitions", 8, Config{PartitionCount: 7}, "PartitionCount"},
		{"load 1 cannot fit 4096 on 3", 3, Config{Load: 1}, "Load"},
		{"load below 1", 3, Config{Load: 0.5}, "Load"},
		{"NaN load", 3, Config{Load: math.NaN()}, "Load"},
		{"negative partitions", 3, Config{PartitionCount: -1}, "PartitionCount"},
		{"negative replication", 3, Config{Placement: PlacementConsistent, ReplicationFactor: -1}, "ReplicationFactor"},
		{"one virtual node each", 3, Config{Placement: PlacementConsistent, ReplicationFactor: 1}, "ReplicationFactor"},
		{"unknown placement", 3, Config{Placement: 9}, "Placement"},
	}
	for _, c := range cases {
		r := New(members(c.members), c.cfg)
		if _, ok := r.Owner("k"); ok {
			t.Errorf("%s: Owner ok = true; want false", c.name)
		}
		if r.Err() == nil || !strings.Contains(r.Err().Error(), c.field) {
			t.Errorf("%s: Err = %v; want one naming %s", c.name, r.Err(), c.field)
		}
	}
}

func TestValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	if err := (Config{Load: 1}).Validate(); err == nil || !strings.Contains(err.Error(), "Load") {
		t.Fatalf("Load 1: got %v; want an error naming Load", err)
	}
}

func TestMembersSortedAndDeduplicated(t *testing.T) {
	r := New([]Member{{Name: "b", RPCAddr: "2"}, {Name: "a", RPCAddr: "9"}, {Name: "a", RPCAddr: "1"}}, Config{})
	want := []Member{{Name: "a", RPCAddr: "1"}, {Name: "b", RPCAddr: "2"}}
	if got := r.Members(); !slices.Equal(got, want) {
		t.Fatalf("got members %v; want %v", got, want)
	}
	if m, ok := r.Member("b"); !ok || m.RPCAddr != "2" {
		t.Fatalf("Member(b) = %v, %v; want {b 2}, true", m, ok)
	}
}

// The backstop: with a load bound of 1 (which Validate refuses) 2 members cannot hold 7
// partitions and consistent panics; build must turn that into an error.
func TestBuildRecoversFromConsistentPanic(t *testing.T) {
	c, err := build(members(2), Config{PartitionCount: 7, ReplicationFactor: 2, Load: 1})
	if c != nil || err == nil {
		t.Fatalf("got %v, %v; want nil and an error", c, err)
	}
}

// A checked op's slot finds the same partition and owner as its key.
func TestSlotLookupsMatchKeyLookups(t *testing.T) {
	rg := New([]Member{{Name: "a"}, {Name: "b"}, {Name: "c"}}, Config{})
	for i := range 2000 {
		key := fmt.Sprintf("key-%d", i)
		if i%7 == 0 {
			key = fmt.Sprintf("{user%d}:logins", i%50)
		}
		slot := hashslot.Of(key)
		m1, ok1 := rg.Owner(key)
		m2, ok2 := rg.SlotOwner(slot)
		if rg.SlotPartition(slot) != rg.Partition(key) || m1 != m2 || ok1 != ok2 {
			t.Fatalf("%q (slot %d): partition %d by slot, %d by key; owner %v by slot, %v by key",
				key, slot, rg.SlotPartition(slot), rg.Partition(key), m2, m1)
		}
	}
}
