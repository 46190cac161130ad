package fallback

import (
	"strconv"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/fallback/conformance"
	"github.com/leapcount/leapcount/hashslot"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/leapcount/leapcount/leaparray"
)

func TestKeyFormat(t *testing.T) {
	sp := spec(60_000, 10)
	for _, tc := range []struct{ key, want string }{
		{"user:42", "lc:{user:42}:60000:10"},
		{"a{}", "lc:{=617b7d}:60000:10"},
		{"}", "lc:{=7d}:60000:10"},
		{"{", "lc:{=7b}:60000:10"},
		{"", "lc:{=}:60000:10"},
		{"=a", "lc:{=3d61}:60000:10"},
		{"a=", "lc:{a=}:60000:10"},
		{"\x00\xff", "lc:{\x00\xff}:60000:10"},
	} {
		if got := counterKey(tc.key, sp); got != tc.want {
			t.Errorf("counterKey(%q) = %q; want %q", tc.key, got, tc.want)
		}
	}
	if a, b := counterKey("k", spec(60_000, 10)), counterKey("k", spec(60_000, 6)); a == b {
		t.Errorf("two shapes of one key share the Redis key %q", a)
	}
}

// hashTag is the Cluster rule: the bytes between the first '{' and the first '}' after
// it, if that is not empty; else the whole key.
func hashTag(key string) string {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return key[s+1 : s+1+e]
		}
	}
	return key
}

// slot is CRC16-XMODEM of the hash tag, mod 16384 (the Redis Cluster spec).
func slot(key string) int64 { return int64(hashslot.Of(key)) }

// A counter's key and its writer key in a Cluster (the tag of the counter's slot) hash
// to one slot whatever bytes the key and the writer hold, by Redis's own CLUSTER
// KEYSLOT and by the rule computed here.
func TestCounterKeysShareOneSlot(t *testing.T) {
	srv := testredis.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	rc := srv.Client(t)
	sp := spec(1000, 10)
	for _, key := range []string{"user:42", "a{b}c", "}{", "{}", "{", "}", "", "=x", "x}y{z", "\xff{\x00}"} {
		ck := counterKey(key, sp)
		want := slot(ck)
		tag := slotTag(hashslot.Of(ck))
		for _, k := range []string{ck, writerKey(tag, "n1.r{1}.7"), writerKey(tag, "}")} {
			got, err := rc.ClusterKeySlot(bg, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got != want || slot(k) != want || int64(hashslot.Of(k)) != want {
				t.Errorf("key %q: CLUSTER KEYSLOT %q = %d, computed %d and %d; want %d (the counter's slot)", key, k, got, slot(k), hashslot.Of(k), want)
			}
		}
		if tag := hashTag(ck); tag != key && !strings.HasPrefix(tag, "=") {
			t.Errorf("key %q: hash tag %q is neither the key nor its encoding", key, tag)
		}
	}
}

// Every slot has a tag of its own, short, that hashes to it.
func TestSlotTags(t *testing.T) {
	seen := map[string]bool{}
	for s := range 16384 {
		tag := slotTag(uint16(s))
		if len(tag) == 0 || len(tag) > 4 || seen[tag] || slot("{"+tag+"}") != int64(s) {
			t.Fatalf("slotTag(%d) = %q (slot %d, seen %v); want a new tag of 1 to 4 bytes in slot %d", s, tag, slot("{"+tag+"}"), seen[tag], s)
		}
		seen[tag] = true
	}
}

// Against a three-node Cluster the store still answers as the in-memory store does, a
// batch call's writer key and counters stay in one slot (no CROSSSLOT), a batch sent
// again after its replies were lost applies once, and a pipeline spans the nodes.
func TestClusterStore(t *testing.T) {
	nodes := testredis.StartCluster(t, 3)
	st := open(t, testredis.ClusterURL(nodes), Config{})
	s := seed(t)
	conformance.Run(t, conformance.Memory(leaparray.NewStore()), ctxStore{st}, conformance.Options{Seed: s, Steps: 1500})
	sp := spec(60_000, 60)
	now := int64(1_700_000_000_000)
	var deltas []Delta
	for i := range 200 {
		key := "k" + strconv.Itoa(i)
		deltas = append(deltas, Delta{Key: key, Spec: sp, Buckets: []leaparray.Bucket{{Index: sp.Bucket(now), Count: uint64(i)}}})
	}
	b := st.NewBatch("cluster", deltas)
	for send := range 3 {
		if err := st.SendBatch(bg, b); err != nil || !b.Confirmed() {
			t.Fatalf("send %d: %v, confirmed %v; want nil, true", send, err, b.Confirmed())
		}
		loseReplies(b)
	}
	counts, err := countAll(st, refsOf(deltas), now)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range counts {
		if c != int64(i) {
			t.Fatalf("count of k%d = %d; want %d", i, c, i)
		}
	}
	clusterFlushMany(t, nodes, st, now)
}

// In a Cluster, a batch puts the counters of one hash slot in one call (two shapes of
// one key share its slot): no CROSSSLOT, one EVALSHA per slot (none has more than
// FlushKeys counters here), one writer key per slot, holding its call's seq, and every
// counter lands.
func clusterFlushMany(t *testing.T, nodes []*testredis.Server, st *Store, now int64) {
	mem := leaparray.NewStore()
	var deltas []Delta
	slots := map[uint16]bool{}
	for i := range 3000 {
		for _, sp := range []leaparray.Spec{spec(60_000, 60), spec(10_000, 10)}[:1+i%2] {
			d := Delta{Key: "many" + strconv.Itoa(i), Spec: sp, Buckets: []leaparray.Bucket{{Index: sp.Bucket(now), Count: uint64(i%9 + 1)}}}
			deltas = append(deltas, d)
			mem.Merge(d.Key, sp, d.Buckets)
			slots[hashslot.Of(counterKey(d.Key, sp))] = true
		}
	}
	resetStats(t, nodes...)
	b := st.NewBatch("cl", deltas)
	if err := st.SendBatch(bg, b); err != nil {
		t.Fatal(err)
	}
	if got, want := evalshaCalls(t, nodes...), int64(len(slots)); got != want {
		t.Fatalf("EVALSHA calls for %d counters in %d slots = %d; want %d", len(deltas), len(slots), got, want)
	}
	marks := map[string]string{}
	for _, n := range nodes {
		rc := n.Client(t)
		for _, k := range rc.Keys(bg, "lc:*:w:cl").Val() {
			marks[k] = rc.Get(bg, k).Val()
		}
	}
	if len(marks) != len(slots) {
		t.Fatalf("%d writer keys for %d slots; want one per slot", len(marks), len(slots))
	}
	for _, c := range b.calls {
		k := writerKey(slotTag(hashslot.Of(c.cmd[4].(string))), "cl")
		if got, want := marks[k], strconv.FormatUint(c.seq, 10); got != want {
			t.Fatalf("mark %s = %q; want %s, its call's seq", k, got, want)
		}
	}
	counts, err := countAll(st, refsOf(deltas), now)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range counts {
		if want := mem.Count(deltas[i].Key, deltas[i].Spec, now); c != want {
			t.Fatalf("count of %s %v = %d; want %d", deltas[i].Key, deltas[i].Spec, c, want)
		}
	}
}
