package node_test

import (
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/leapcount/leapcount/node"
)

// handshakeBurst opens n TLS connections to addr at once, each a full handshake (no
// session to resume), and returns how many handshakes succeeded and failed.
func handshakeBurst(t *testing.T, addr string, conf *tls.Config, n int) (ok, failed int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, conf.Clone())
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				return
			}
			ok++
			c.Close()
		})
	}
	wg.Wait()
	return ok, failed
}

// --tls-handshake-rate: 40 handshakes at once against a rate of 5 a second and a 1 s
// handshake timeout: the first second's worth begin at once, the two whose turn comes
// within half the timeout after their wait (0.2 and 0.4 s), and the rest are refused
// before any costly step, every failure counted by the metric (before, a turn at 1 s
// was taken with no time left, and that handshake failed uncounted); a handshake a
// moment later succeeds. Without the bound all 40 succeed.
func TestTLSHandshakesArePaced(t *testing.T) {
	for _, c := range []struct {
		rate    float64
		maxOK   int
		refused bool
	}{{5, 5 + 2 + 1, true}, {-1, 40, false}} {
		tn := startTLSNode(t, false, func(cfg *node.Config) {
			cfg.TLSHandshakeRate, cfg.TLSHandshakeTimeout = c.rate, time.Second
		})
		conf := goTLS(t, tn.pool, nil)
		ok, failed := handshakeBurst(t, tn.n.RESPTLSAddr(), conf, 40)
		t.Logf("rate %v: %d handshakes succeeded, %d refused", c.rate, ok, failed)
		if ok > c.maxOK || ok < 5 {
			t.Errorf("rate %v: %d of 40 handshakes at once succeeded; want 5 to %d", c.rate, ok, c.maxOK)
		}
		if got := scrape(tn.n, `leapcount_client_tls_handshakes_paced_total{result="refused"}`); c.refused && (failed == 0 || int(got) != failed) {
			t.Errorf("rate %v: %d refused, the metric says %v; want some, counted", c.rate, failed, got)
		}
		if !c.refused && failed != 0 {
			t.Errorf("no bound: %d handshakes failed", failed)
		}
		if ok, _ := handshakeBurst(t, tn.n.RESPTLSAddr(), conf, 1); ok != 1 {
			t.Errorf("rate %v: a handshake after the burst failed", c.rate)
		}
	}
}
