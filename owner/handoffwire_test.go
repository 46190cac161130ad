package owner

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/wire"
	"github.com/leapcount/leapcount/leaparray"
)

var spec10 = leaparray.Spec{WindowMs: 60_000, Buckets: 10}

type handoffSink struct {
	mu  sync.Mutex
	got []*Handoff
	err error
}

func (s *handoffSink) Handoff(_ context.Context, h *Handoff) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, h)
	return s.err
}

func (s *handoffSink) refuse(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// answerHandoff delivers h as a receiver reads it, to sink, and returns what its
// sender hears.
func answerHandoff(t *testing.T, sink Receiver, h *Handoff) error {
	t.Helper()
	body, err := EncodeHandoff(h)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := HandoffAnswerer(sink)(context.Background(), body, nil)
	if err != nil {
		t.Fatalf("the receiver rejects %+v: %v", h, err)
	}
	d := wire.NewDecoder(ack)
	err = ReadHandoffAck(&d)
	if bad := d.End(); bad != nil {
		t.Fatalf("malformed ack %x: %v", ack, bad)
	}
	return err
}

// A Handoff reaches its receiver intact, with and without fences and an epoch, and
// the sender hears the receiver's refusal as it was meant.
func TestHandoffRoundTrip(t *testing.T) {
	sink := &handoffSink{}
	h := &Handoff{From: "n1", ID: 9, ToRun: 77, Partitions: []int{3, 270},
		Counters: []HandoffCounter{
			{Key: "k{x}", Spec: spec10,
				Buckets: []leaparray.Bucket{{Index: -5, Count: 1}, {Index: 1 << 40, Count: 1 << 50}},
				Pending: []leaparray.Bucket{{Index: 1 << 40, Count: 3}}, Reset: true},
			{Key: "", Spec: leaparray.Spec{WindowMs: 1, Buckets: 1}},
		},
		Fences: []HandoffFence{{WriterKey: "lc:{w}:w:n1.7", Seq: 1 << 40}, {WriterKey: "", Seq: 0}}}
	noFences := *h
	noFences.ID, noFences.Fences = 10, nil // no fences, no epoch
	epochOnly := noFences
	epochOnly.ID, epochOnly.RedisEpoch = 11, "1a2b" // an empty fence section, then the epoch
	both := *h
	both.ID, both.RedisEpoch = 12, "1a2b"
	want := []*Handoff{h, &noFences, &epochOnly, &both}
	for _, x := range want {
		if err := answerHandoff(t, sink, x); err != nil {
			t.Fatal(err)
		}
	}
	sink.mu.Lock()
	if !reflect.DeepEqual(sink.got, want) {
		t.Fatalf("got %+v; want %+v", sink.got, want)
	}
	sink.mu.Unlock()
	for _, tc := range []struct {
		refusal     error
		want, wantN error
	}{
		{errors.New("not expecting it"), ErrHandoffRefused, ErrHandoffNotOwner},
		{fmt.Errorf("%w: partition 3 is n2's here", ErrHandoffNotOwner), ErrHandoffNotOwner, ErrHandoffOtherRun},
		{fmt.Errorf("%w: run 8", ErrHandoffOtherRun), ErrHandoffOtherRun, ErrHandoffNotOwner},
	} {
		sink.refuse(tc.refusal)
		err := answerHandoff(t, sink, h)
		if !errors.Is(err, tc.want) || !errors.Is(err, ErrHandoffRefused) || errors.Is(err, tc.wantN) {
			t.Fatalf("refused with %v: got %v; want %v (an ErrHandoffRefused), not %v", tc.refusal, err, tc.want, tc.wantN)
		}
	}
}

func randomBuckets(r *rand.Rand, n int) []leaparray.Bucket {
	if n == 0 {
		return nil
	}
	bs := make([]leaparray.Bucket, n)
	for i := range bs {
		bs[i] = leaparray.Bucket{Index: r.Int64() >> r.IntN(64), Count: r.Uint64() >> r.IntN(64)}
		if r.IntN(2) == 0 {
			bs[i].Index = -bs[i].Index
		}
	}
	return bs
}

// HandoffSize is exactly what a counter takes on the wire, and the client's bound on
// a frame's size is never below the frame.
func TestHandoffSize(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for i := 0; i < 1000; i++ {
		buckets := 1 + r.IntN(counter.MaxBuckets)
		c := HandoffCounter{Key: string(make([]byte, r.IntN(300))), Reset: r.IntN(2) == 0,
			Spec:    leaparray.Spec{WindowMs: int64(buckets) * (1 + r.Int64N(1000)), Buckets: buckets},
			Buckets: randomBuckets(r, r.IntN(buckets+1)), Pending: randomBuckets(r, r.IntN(buckets+1))}
		if got, want := HandoffSize(&c), len(appendHandoffCounter(nil, &c)); got != want {
			t.Fatalf("counter %d: HandoffSize got %d; want %d", i, got, want)
		}
		h := &Handoff{From: "n1", ID: r.Uint64(), ToRun: r.Uint64(), Partitions: []int{r.IntN(1 << 20)}, Counters: []HandoffCounter{c}}
		frame := appendHandoff(make([]byte, 4+1+binary.MaxVarintLen64), h) // length, type, the longest id
		if bound := handoffFrameSize(h); bound < len(frame) || bound > len(frame)+9 {
			t.Fatalf("handoff %d: frame size bound %d for a frame of %d", i, bound, len(frame))
		}
	}
}

// bigCounters returns counters of 3600 buckets each that take at least bytes.
func bigCounters(bytes int) []HandoffCounter {
	var cs []HandoffCounter
	for n := 0; n < bytes; {
		c := HandoffCounter{Key: fmt.Sprint("k", len(cs)), Spec: leaparray.Spec{WindowMs: 3_600_000, Buckets: 3600},
			Buckets: make([]leaparray.Bucket, 3600)}
		for i := range c.Buckets {
			c.Buckets[i] = leaparray.Bucket{Index: 1 << 40, Count: 1 << 40}
		}
		n += HandoffSize(&c)
		cs = append(cs, c)
	}
	return cs
}

// A handoff over MaxHandoffBytes, or one the receiver would reject, is refused before
// it is sent; one just under the limit is applied.
func TestHandoffLimits(t *testing.T) {
	cs := bigCounters(MaxHandoffBytes)
	if _, err := EncodeHandoff(&Handoff{From: "n1", Counters: cs}); !errors.Is(err, ErrHandoffTooLarge) {
		t.Fatalf("handoff over the limit: got %v; want ErrHandoffTooLarge", err)
	}
	for _, bad := range []HandoffCounter{
		{Key: "w", Spec: leaparray.Spec{WindowMs: 0, Buckets: 1}},
		{Key: "b", Spec: leaparray.Spec{WindowMs: 60_000, Buckets: 7}},
		{Key: "n", Spec: leaparray.Spec{WindowMs: 60_000, Buckets: 1}, Pending: make([]leaparray.Bucket, 2)},
	} {
		if _, err := EncodeHandoff(&Handoff{Counters: []HandoffCounter{bad}}); err == nil {
			t.Errorf("%+v: encoded a counter the receiver rejects", bad.Spec)
		}
	}
	h := &Handoff{From: "n1", Counters: cs[:len(cs)-1]}
	if handoffFrameSize(h) > MaxHandoffBytes {
		t.Fatal("test bug: the smaller handoff is over the limit too")
	}
	if err := answerHandoff(t, &handoffSink{}, h); err != nil {
		t.Fatalf("handoff under the limit: %v", err)
	}
}

// RawHandoff builds a handoff's encoding with one counter given raw.
func rawHandoff(counter ...[]byte) []byte {
	b := nameOf(2)
	b = append(b, 1, 1, 0, 1) // id, epoch, no partitions, one counter
	for _, p := range counter {
		b = append(b, p...)
	}
	return b
}

// The handoff decoder validates every counter, a counter claiming 2^31 buckets costs
// nothing, and a frame without its fences or its epoch is malformed.
func TestDecodeHandoffBounds(t *testing.T) {
	key, spec := nameOf(1), append(uv(60_000), uv(10)...)
	zero := uv(0)
	none := append(uv(0), nameOf(0)...) // no fences, no epoch
	for _, tc := range []struct {
		name  string
		frame []byte
		ok    bool
	}{
		{"valid", rawHandoff(key, spec, []byte{1}, zero, zero, none), true},
		{"bad window", rawHandoff(key, uv(0), uv(10), []byte{0}, zero, zero, none), false},
		{"window not divisible", rawHandoff(key, uv(60_000), uv(7), []byte{0}, zero, zero, none), false},
		{"2^31 buckets in the spec", rawHandoff(key, uv(1<<31), uv(1<<31), []byte{0}, zero, zero, none), false},
		{"unknown flag", rawHandoff(key, spec, []byte{2}, zero, zero, none), false},
		{"more buckets than the spec", rawHandoff(key, spec, []byte{0}, uv(11), make([]byte, 22), zero, none), false},
		{"more pending than the spec", rawHandoff(key, spec, []byte{0}, zero, uv(11), make([]byte, 22), none), false},
		{"2^31 buckets claimed", rawHandoff(key, spec, []byte{0}, uv(1<<31), make([]byte, 64)), false},
		{"no fence count", rawHandoff(key, spec, []byte{0}, zero, zero), false},
		{"no epoch", rawHandoff(key, spec, []byte{0}, zero, zero, zero), false},
		{"trailing bytes", rawHandoff(key, spec, []byte{0}, zero, zero, none, zero), false},
		{"a fence", rawHandoff(key, spec, []byte{0}, zero, zero, uv(1), nameOf(3), uv(7), nameOf(0)), true},
		{"a fence cut short", rawHandoff(key, spec, []byte{0}, zero, zero, uv(1), nameOf(3)), false},
		{"a fence, no epoch", rawHandoff(key, spec, []byte{0}, zero, zero, uv(1), nameOf(3), uv(7)), false},
		{"2^31 fences claimed", rawHandoff(key, spec, []byte{0}, zero, zero, uv(1<<31), nameOf(3), uv(7), nameOf(0)), false},
		{"an epoch", rawHandoff(key, spec, []byte{0}, zero, zero, zero, nameOf(8)), true},
		{"a fence and an epoch", rawHandoff(key, spec, []byte{0}, zero, zero, uv(1), nameOf(3), uv(7), nameOf(8)), true},
		{"an epoch too long", rawHandoff(key, spec, []byte{0}, zero, zero, zero, nameOf(MaxHandoffEpochBytes+1)), false},
		{"bytes after the epoch", rawHandoff(key, spec, []byte{0}, zero, zero, zero, nameOf(8), zero), false},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		out, err := HandoffAnswerer(&handoffSink{})(context.Background(), tc.frame, nil)
		runtime.ReadMemStats(&after)
		if (err == nil) != tc.ok || (err == nil) != (out != nil) {
			t.Errorf("%s: got %v; want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("%s: got %v; want wire.ErrMalformed", tc.name, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s: decoding allocated %d bytes", tc.name, n)
		}
	}
}

func uv(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func nameOf(n int) []byte { return append(uv(uint64(n)), strings.Repeat("n", n)...) }
