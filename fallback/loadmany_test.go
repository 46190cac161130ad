package fallback

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/leaparray"
)

// LoadMany reads what Load reads, counter by counter, in one pipeline: counters known,
// unknown and of another spec; with Redis gone every one fails as unavailable.
func TestLoadManyMatchesLoad(t *testing.T) {
	srv, st := startStore(t)
	sp := leaparray.Spec{WindowMs: 60_000, Buckets: 10}
	const now = 1_700_000_000_000
	var refs []CounterRef
	for i := 0; i < 50; i++ {
		k := fmt.Sprintf("lm:%d", i)
		refs = append(refs, CounterRef{Key: k, Spec: sp})
		if i%3 == 0 {
			continue // unknown
		}
		for j := 0; j < i%7+1; j++ {
			if _, err := st.Incr(bg, k, sp, int64(i+j), now-int64(j)*6_000); err != nil {
				t.Fatal(err)
			}
		}
	}
	refs = append(refs, CounterRef{Key: "lm:1", Spec: leaparray.Spec{WindowMs: 1_000, Buckets: 10}})
	got := st.LoadMany(bg, refs, now)
	for i, r := range refs {
		want, err := st.Load(bg, r.Key, r.Spec, now)
		if err != nil || got[i].Err != nil || !reflect.DeepEqual(got[i].Buckets, want) {
			t.Fatalf("%s: LoadMany got %v, %v; Load got %v, %v", r.Key, got[i].Buckets, got[i].Err, want, err)
		}
	}
	srv.Stop()
	for _, l := range st.LoadMany(bg, refs[:3], now) {
		if !errors.Is(l.Err, counter.ErrUnavailable) {
			t.Fatalf("with Redis gone: got %v; want ErrUnavailable", l.Err)
		}
	}
}
