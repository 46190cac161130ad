package fallback

import (
	"strconv"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/fallback/conformance"
	"github.com/leapcount/leapcount/internal/testredis"
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
func slot(key string) int64 {
	var crc uint16
	for _, c := range []byte(hashTag(key)) {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int64(crc) % 16384
}

// A counter's key and its markers hash to one slot whatever bytes the key holds, by
// Redis's own CLUSTER KEYSLOT and by the rule computed here.
func TestCounterKeysShareOneSlot(t *testing.T) {
	srv := testredis.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	rc := srv.Client(t)
	sp := spec(1000, 10)
	for _, key := range []string{"user:42", "a{b}c", "}{", "{}", "{", "}", "", "=x", "x}y{z", "\xff{\x00}"} {
		ck := counterKey(key, sp)
		want := slot(ck)
		for _, k := range []string{ck, onceKey(ck, "batch{1}"), onceKey(ck, "}")} {
			got, err := rc.ClusterKeySlot(bg, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got != want || slot(k) != want {
				t.Errorf("key %q: CLUSTER KEYSLOT %q = %d, computed %d; want %d (the counter's slot)", key, k, got, slot(k), want)
			}
		}
		if tag := hashTag(ck); tag != key && !strings.HasPrefix(tag, "=") {
			t.Errorf("key %q: hash tag %q is neither the key nor its encoding", key, tag)
		}
	}
}

// Against a three-node Cluster the store still answers as the in-memory store does,
// MergeOnce's two keys stay in one slot (no CROSSSLOT), and a pipelined Do or
// FlushDeltas spans the nodes.
func TestClusterStore(t *testing.T) {
	nodes := testredis.StartCluster(t, 3)
	st := open(t, testredis.ClusterURL(nodes), Config{})
	s := seed(t)
	conformance.Run(t, conformance.Memory(leaparray.NewStore()), ctxStore{st}, conformance.Options{Seed: s, Steps: 1500})
	sp := spec(60_000, 60)
	now := int64(1_700_000_000_000)
	var deltas []Delta
	var ops []counter.Op
	for i := range 200 {
		key := "k" + strconv.Itoa(i)
		deltas = append(deltas, Delta{Key: key, Spec: sp, BatchID: "f1",
			Buckets: []leaparray.Bucket{{Index: sp.Bucket(now), Count: uint64(i)}}})
		ops = append(ops, counter.Op{Kind: counter.Count, Key: key, Window: sp.WindowMs, Buckets: sp.Buckets})
	}
	for range 2 {
		if err := st.FlushDeltas(bg, deltas); err != nil {
			t.Fatal(err)
		}
	}
	res := make([]counter.Result, len(ops))
	(&Doer{Store: st, Now: func() int64 { return now }}).Do(bg, ops, res)
	for i, r := range res {
		if r.Err != nil || r.Count != int64(i) {
			t.Fatalf("count of k%d = %d (err %v); want %d", i, r.Count, r.Err, i)
		}
	}
}
