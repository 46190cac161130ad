package owner

import (
	"testing"
	"time"
)

// lock and unlock take and let go of Owner.mu, for tests that look inside it.
func (o *Owner) lock()   { o.mu.Lock() }
func (o *Owner) unlock() { o.mu.Unlock() }

// TestFiguresReadRecordsWhileTheRingChanges: Unwritten (the metrics' figure) reads the
// Records without Owner.mu while the first ring makes them (a data race before: the
// table was a plain slice; -race finds it).
func TestFiguresReadRecordsWhileTheRingChanges(t *testing.T) {
	n := &net{flush: time.Hour}
	a := n.add(t, "a", nil)
	reading, stop, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			a.Unwritten()
			if i == 0 {
				close(reading)
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	<-reading
	a.SetRing(ringOf("a"))
	close(stop)
	<-done
	if a.parts.count() != ringOf("a").PartitionCount() {
		t.Fatalf("%d Records; want one a partition", a.parts.count())
	}
}
