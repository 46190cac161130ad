package fallback

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
)

// Refs come back as they went in, oldest first, whatever bytes the keys and the owner
// hold; max bounds each take; an empty journal gives nil.
func TestJournalRoundTrip(t *testing.T) {
	srv, st := startStore(t)
	odd := []string{"user:42", "", "{", "}", "a{b}c", "}{", "=x", "\x00\xff\n", ":", "a:b:c", "1:2:3", "ключ",
		strings.Repeat("long", 300)}
	var want []CounterRef
	for i, k := range odd {
		want = append(want, CounterRef{Key: k, Spec: spec(int64(1000*(i+1)), 10)})
	}
	want = append(want, want[0]) // duplicates are kept
	for _, owner := range []string{"node-1", "", "n{1}", "\xff"} {
		if err := st.Journal(bg, owner, want[:5]); err != nil {
			t.Fatal(err)
		}
		if err := st.Journal(bg, owner, want[5:]); err != nil {
			t.Fatal(err)
		}
	}
	for _, owner := range []string{"node-1", "", "n{1}", "\xff"} {
		var got []CounterRef
		for _, max := range []int{3, 1, 100} {
			refs, err := st.TakeJournal(bg, owner, max)
			if err != nil {
				t.Fatal(err)
			}
			if len(refs) > max {
				t.Fatalf("owner %q: TakeJournal(%d) gave %d refs", owner, max, len(refs))
			}
			got = append(got, refs...)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("owner %q: took %+v; want %+v", owner, got, want)
		}
		refs, err := st.TakeJournal(bg, owner, 10)
		if err != nil || refs != nil {
			t.Fatalf("owner %q: TakeJournal of an empty journal = %v, %v; want nil, nil", owner, refs, err)
		}
	}
	if n := srv.Client(t).DBSize(bg).Val(); n != 0 {
		t.Fatalf("%d keys left after every journal was taken; want 0", n)
	}
}

// A push sets the journal's TTL to JournalTTL; bad input writes nothing; entries not
// written by Journal are dropped on take.
func TestJournalTTLAndBadInput(t *testing.T) {
	srv, st := startStore(t)
	rc := srv.Client(t)
	ref := CounterRef{Key: "k", Spec: spec(60_000, 60)}
	if err := st.Journal(bg, "o", []CounterRef{ref}); err != nil {
		t.Fatal(err)
	}
	if ttl := rc.PTTL(bg, journalKey("o")).Val(); ttl <= DefaultJournalTTL-time.Minute || ttl > DefaultJournalTTL {
		t.Fatalf("journal PTTL = %v; want about %v", ttl, DefaultJournalTTL)
	}
	short := open(t, srv.URL(), Config{JournalTTL: time.Minute})
	if err := short.Journal(bg, "o", []CounterRef{ref}); err != nil {
		t.Fatal(err)
	}
	if ttl := rc.PTTL(bg, journalKey("o")).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("journal PTTL after a push with JournalTTL 1m = %v; want it refreshed to 1m", ttl)
	}
	err := st.Journal(bg, "o", []CounterRef{ref, {Key: "bad", Spec: spec(10, 3)}})
	if !errors.Is(err, counter.ErrBadBuckets) {
		t.Fatalf("Journal with a bad spec: %v; want ErrBadBuckets", err)
	}
	if _, err := st.TakeJournal(bg, "o", 0); !errors.Is(err, counter.ErrBadArgument) {
		t.Fatalf("TakeJournal(max 0): %v; want ErrBadArgument", err)
	}
	rc.RPush(bg, journalKey("o"), "junk", "1:2", "x:10:k", "60000:7:k", "10:3:k")
	if err := st.Journal(bg, "o", []CounterRef{ref}); err != nil {
		t.Fatal(err)
	}
	got, err := st.TakeJournal(bg, "o", 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := []CounterRef{ref, ref, ref}; !reflect.DeepEqual(got, want) {
		t.Fatalf("took %v; want %v (the bad spec and the junk dropped)", got, want)
	}
}

// A big journal goes in one call and comes out in order.
func TestJournalMany(t *testing.T) {
	_, st := startStore(t)
	var refs []CounterRef
	for i := range 3*journalPush + 5 {
		refs = append(refs, CounterRef{Key: strings.Repeat("x", i%7) + string(rune('a'+i%26)), Spec: spec(int64(10*(100+i)), 10)})
	}
	if err := st.Journal(bg, "big", refs); err != nil {
		t.Fatal(err)
	}
	var got []CounterRef
	for {
		part, err := st.TakeJournal(bg, "big", 5000)
		if err != nil {
			t.Fatal(err)
		}
		if part == nil {
			break
		}
		got = append(got, part...)
	}
	if !reflect.DeepEqual(got, refs) {
		t.Fatalf("took %d refs; want the %d pushed, in order", len(got), len(refs))
	}
}
