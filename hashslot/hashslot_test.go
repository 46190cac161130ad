package hashslot

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/testredis"
)

// bitwise is CRC16/XMODEM of key's tag computed bit by bit, the spec's way.
func bitwise(key string) uint16 {
	var crc uint16
	for _, c := range []byte(tag(key)) {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % Count
}

func randomKeys(t *testing.T, n int) []string {
	s := uint64(time.Now().UnixNano())
	t.Logf("seed %d", s)
	rng := rand.New(rand.NewPCG(s, 9))
	alphabet := []byte("ab{}:\x00\xff")
	keys := make([]string, n)
	for i := range keys {
		k := make([]byte, rng.IntN(12))
		for j := range k {
			k[j] = alphabet[rng.IntN(len(alphabet))]
		}
		keys[i] = string(k)
	}
	return keys
}

func TestSpecExamples(t *testing.T) {
	if got := Of("123456789"); got != 0x31C3 { // CRC16/XMODEM("123456789") = 0x31C3
		t.Fatalf("Of(123456789) = %d; want %d", got, 0x31C3)
	}
	// The tag rule, from the Redis Cluster specification.
	for _, c := range []struct{ key, tag string }{
		{"{user1000}.following", "user1000"}, {"foo{}{bar}", "foo{}{bar}"}, {"foo{{bar}}zap", "{bar"},
		{"foo{bar}{zap}", "bar"}, {"no tag", "no tag"}, {"{", "{"}, {"}{", "}{"},
	} {
		if got := tag(c.key); got != c.tag {
			t.Errorf("tag(%q) = %q; want %q", c.key, got, c.tag)
		}
		if Of(c.key) != Of(c.tag) || Of([]byte(c.key)) != Of(c.key) {
			t.Errorf("Of(%q) = %d, Of(%q) = %d; want equal, for strings and bytes", c.key, Of(c.key), c.tag, Of(c.tag))
		}
	}
}

func TestTableMatchesBitwise(t *testing.T) {
	for _, k := range randomKeys(t, 5000) {
		if got, want := Of(k), bitwise(k); got != want {
			t.Fatalf("Of(%q) = %d; want %d", k, got, want)
		}
	}
}

// TestMatchesRedis asks a real redis-server in cluster mode for CLUSTER KEYSLOT.
func TestMatchesRedis(t *testing.T) {
	rc := testredis.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf").Client(t)
	ctx := context.Background()
	for _, k := range randomKeys(t, 500) {
		got, err := rc.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(Of(k)); got != want {
			t.Fatalf("CLUSTER KEYSLOT %q = %d; Of says %d", k, got, want)
		}
	}
}

func BenchmarkOf(b *testing.B) {
	key := "user:1234567:login"
	for b.Loop() {
		_ = Of(key)
	}
}
