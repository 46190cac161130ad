package fairshare

import (
	"math"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/wire"
)

func TestRequestRoundTrips(t *testing.T) {
	req := Request{Bucket: "rlqs:d:tenant=acme", Stream: "node-1/7", Demand: 12.5, Capacity: 40}
	d := wire.NewDecoder(AppendRequest(nil, req))
	if got := ReadRequest(&d); got != req || d.End() != nil {
		t.Fatalf("read %+v (%v), want %+v", got, d.End(), req)
	}
	d = wire.NewDecoder(AppendShare(nil, 3.25))
	if got := ReadShare(&d); got != 3.25 || d.End() != nil {
		t.Fatalf("read share %v (%v), want 3.25", got, d.End())
	}
}

// A request whose rates are not finite and within bounds, or that is cut short or
// runs on, is malformed: a peer's bad bytes never reach the shares.
func TestReadRequestRejectsBadInput(t *testing.T) {
	good := AppendRequest(nil, Request{Bucket: "b", Stream: "s", Demand: 1, Capacity: 2})
	for name, b := range map[string][]byte{
		"NaN demand":        AppendRequest(nil, Request{Bucket: "b", Stream: "s", Demand: math.NaN(), Capacity: 2}),
		"negative capacity": AppendRequest(nil, Request{Bucket: "b", Stream: "s", Demand: 1, Capacity: -1}),
		"infinite demand":   AppendRequest(nil, Request{Bucket: "b", Stream: "s", Demand: math.Inf(1), Capacity: 2}),
		"cut short":         good[:len(good)-1],
		"trailing bytes":    append(append([]byte{}, good...), 0),
		"empty":             nil,
	} {
		d := wire.NewDecoder(b)
		ReadRequest(&d)
		if d.End() == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
}

// Streams share a bucket's capacity max-min fairly, and a stream that stops
// reporting is forgotten after the stale period.
func TestDemandsShareAmongLiveStreams(t *testing.T) {
	now := time.Unix(0, 0)
	d := New(time.Second, func() time.Time { return now })
	share := func(stream string, demand float64) float64 {
		return d.Share(Request{Bucket: "b", Stream: stream, Demand: demand, Capacity: 30})
	}
	share("a", 5)
	share("b", 100)
	if got := share("c", 100); got != 12.5 {
		t.Fatalf("c's share with a at 5 and b at 100 of 30: %v, want 12.5", got)
	}
	now = now.Add(2 * time.Second)
	if got := share("c", 100); got != 30 {
		t.Fatalf("c's share once a and b went quiet: %v, want 30", got)
	}
	d.Share(Request{Bucket: "other", Stream: "x", Demand: 1, Capacity: 1})
	now = now.Add(3 * time.Second)
	d.Share(Request{Bucket: "third", Stream: "x", Demand: 1, Capacity: 1})
	if n := d.Len(); n != 1 {
		t.Fatalf("%d buckets kept after the others went quiet, want 1", n)
	}
}
