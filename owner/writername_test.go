package owner

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"
)

func TestParseWriter(t *testing.T) {
	for _, c := range []struct {
		key  string
		name string
		run  uint64
		ok   bool
	}{
		{"lc:{w}:w:" + WriterName("n1", 0x1f), "n1", 0x1f, true},
		{"lc:{3k}:w:" + WriterName("host.example", 7), "host.example", 7, true},
		{WriterName("n0", 1), "n0", 1, true},
		{"lc:{w}:w:a.test", "", 0, false},
		{"lc:{w}:w:nodot", "", 0, false},
		{"", "", 0, false},
	} {
		name, run, ok := parseWriter(c.key)
		if name != c.name || run != c.run || ok != c.ok {
			t.Errorf("parseWriter(%q) = %q, %d, %v; want %q, %d, %v", c.key, name, run, ok, c.name, c.run, c.ok)
		}
	}
}

// A writer's run is over once its node runs again under a later run (a crash, a
// restart), or once it is this node's own earlier run.
func TestWriterGone(t *testing.T) {
	fl := newFakeLeases()
	fl.peerRun.Store(0x20)
	o := &Owner{cfg: Config{Self: "a", Incarnation: 0x10, Leases: fl}}
	for _, c := range []struct {
		key  string
		gone bool
	}{
		{"lc:{w}:w:" + WriterName("b", 0x1f), true},
		{"lc:{w}:w:" + WriterName("b", 0x20), false},
		{"lc:{w}:w:" + WriterName("a", 0x0f), true},
		{"lc:{w}:w:" + WriterName("a", 0x10), false},
		{"lc:{w}:w:a.test", false},
	} {
		if got := o.writerGone(c.key); got != c.gone {
			t.Errorf("writerGone(%q) = %v; want %v", c.key, got, c.gone)
		}
	}
}

// Fences of a writer whose run is over are dropped at the next expiry: nobody will send
// its calls again, and loads of their partitions would wait fenceMax (a minute) for
// nothing (sim seeds 358 and 372 with calls lost on their way to Redis).
func TestFencesOfARunThatIsOverAreDropped(t *testing.T) {
	fl := newFakeLeases()
	fl.peerRun.Store(0x20) // b's run 5 is over, c's run 0x30 is not
	o := &Owner{cfg: Config{Self: "a", Incarnation: 0x10, Leases: fl, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	o.parts.size(8)
	gone, alive := "lc:{w}:w:"+WriterName("b", 5), "lc:{w}:w:"+WriterName("c", 0x30)
	o.addFences([]int{3, 4}, []HandoffFence{{WriterKey: gone, Seq: 9}}, 0)
	o.addFences([]int{3}, []HandoffFence{{WriterKey: alive, Seq: 2}}, 0)
	o.expireFences(time.Second)
	if o.fenced(4) {
		t.Error("partition 4 still fenced by a writer whose run is over")
	}
	if got := o.fencesOf([]int{3}, false); !slices.Equal(got, []HandoffFence{{WriterKey: alive, Seq: 2}}) {
		t.Errorf("partition 3's fences: got %+v; want only the live writer's", got)
	}
	fl.peerRun.Store(0x40) // c's run is over too
	o.expireFences(time.Second)
	if o.fenced(3) {
		t.Error("partition 3 still fenced once every writer's run is over")
	}
	if n := o.UnknownTransitions(); n != 0 {
		t.Errorf("%d unknown transitions", n)
	}
}
