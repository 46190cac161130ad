package authlimit

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/clocktest"
)

// newLimiter is a Limiter on a manual clock.
func newLimiter(cfg Config) (*Limiter, *clocktest.Clock) {
	c := clocktest.New(1_700_000_000_000)
	cfg.Now = func() time.Time { return time.UnixMilli(c.Now()) }
	return New(cfg), c
}

var a, b = netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")

func TestBurstThenOnePerEvery(t *testing.T) {
	l, clk := newLimiter(Config{Burst: 3, Every: time.Second})
	for i := range 3 {
		if ok, _ := l.Wrong(a); !ok {
			t.Fatalf("guess %d refused; want the first 3 taken", i+1)
		}
	}
	ok, retry := l.Wrong(a)
	if ok || retry != time.Second {
		t.Fatalf("guess 4: got %v, retry %v; want refused, retry 1s", ok, retry)
	}
	if ok, _ := l.Wrong(b); !ok {
		t.Fatal("another source refused; want its own budget")
	}
	clk.Advance(400)
	if ok, retry := l.Wrong(a); ok || retry != 600*time.Millisecond {
		t.Fatalf("0.4s later: got %v, retry %v; want refused, retry 600ms", ok, retry)
	}
	clk.Advance(600)
	if ok, _ := l.Wrong(a); !ok {
		t.Fatal("1s later: refused; want one more guess")
	}
	if ok, _ := l.Wrong(a); ok {
		t.Fatal("1s later, second guess taken; want one per second")
	}
	clk.Advance(time.Hour.Milliseconds()) // a full bucket holds Burst, not more
	for i := range 4 {
		if ok, _ := l.Wrong(a); ok != (i < 3) {
			t.Fatalf("an hour later, guess %d: got %v; want %v", i+1, ok, i < 3)
		}
	}
	if got := l.Refused(); got != 4 {
		t.Fatalf("Refused: got %d; want 4", got)
	}
}

// However many sources guess, the map holds at most MaxSources; a full bucket is
// dropped, and while none is full, new sources share one overflow bucket.
func TestSourcesAreBounded(t *testing.T) {
	const max = 64
	l, clk := newLimiter(Config{Burst: 2, Every: time.Second, MaxSources: max})
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) }
	for i := range max {
		l.Wrong(addr(i))
	}
	taken := 0
	for i := max; i < 10*max; i++ {
		if ok, _ := l.Wrong(addr(i)); ok {
			taken++
		}
	}
	if got := l.Sources(); got > max+1 {
		t.Fatalf("got %d sources; want at most %d and the overflow bucket", got, max)
	}
	if taken != 2 {
		t.Fatalf("new sources while full: %d guesses taken; want the overflow bucket's 2", taken)
	}
	if ok, _ := l.Wrong(addr(0)); !ok {
		t.Fatal("a known source lost its budget to the flood")
	}
	clk.Advance(2000) // every bucket full again: dropped at the next new source
	if ok, _ := l.Wrong(addr(20 * max)); !ok {
		t.Fatal("a new source refused after the buckets refilled")
	}
	if got := l.Sources(); got != 1 {
		t.Fatalf("got %d sources after the refill; want 1", got)
	}
}

// Concurrent wrong guesses from one source never exceed its burst.
func TestConcurrentGuessesKeepTheBudget(t *testing.T) {
	l, _ := newLimiter(Config{Burst: 10, Every: time.Hour})
	var taken atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if ok, _ := l.Wrong(a); ok {
					taken.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := taken.Load(); got != 10 {
		t.Fatalf("got %d guesses taken; want the burst, 10", got)
	}
}

func TestSource(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"192.0.2.7:6380", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:6380", "192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:80", "2001:db8:1:2::"},
		{"[2001:db8:1:2:ffff::1%eth0]:80", "2001:db8:1:2::"},
		{"192.0.2.7", "192.0.2.7"},
		{"not an address", "invalid IP"},
	} {
		if got := SourceString(c.in).String(); got != c.want {
			t.Errorf("SourceString(%q) = %s; want %s", c.in, got, c.want)
		}
	}
	tcp := &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 1}
	if got := Source(tcp).String(); got != "2001:db8::" {
		t.Errorf("Source(%v) = %s; want 2001:db8::", tcp, got)
	}
}
