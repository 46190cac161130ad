package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// rotation is the members clients send requests to, as a load balancer's pool: a member
// leaves it before it stops and comes back once the cluster has settled again.
type rotation struct {
	mu sync.Mutex
	in []*member
}

func (r *rotation) pick(rng *rand.Rand) *member {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.in[rng.IntN(len(r.in))]
}

func (r *rotation) set(ms []*member) {
	r.mu.Lock()
	r.in = ms
	r.mu.Unlock()
}

// load sends increments on 200 keys through the rotation from 4 clients until stop is
// closed, and counts what each key was acknowledged, and the requests whose outcome is
// unknown (no answer in time, or none at all).
type load struct {
	ok, failed atomic.Int64
	acked      [200]atomic.Int64
	unknown    [200]atomic.Int64
	firstErr   atomic.Value
}

// loadClient waits for an answer as a client of a cluster would: an op may wait for its
// partition's new owner (--handoff-wait, 2 s) and a forward.
var loadClient = &http.Client{Timeout: 10 * time.Second}

func (l *load) run(rot *rotation, stop chan struct{}, wg *sync.WaitGroup) {
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := rng.IntN(len(l.acked))
				m := rot.pick(rng)
				if err := incrOn(loadClient, m, fmt.Sprintf("rolling:%d", k)); err != nil {
					if l.failed.Add(1) <= 100 { // each failure with when and where, for the nodes' logs
						fmt.Fprintf(os.Stderr, "fleet: %s through %s: %v\n", time.Now().UTC().Format(time.RFC3339Nano), m.name, err)
					}
					if !strings.HasPrefix(err.Error(), "incr ") { // (no answer: it may have counted)
						l.unknown[k].Add(1)
					}
					l.firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				l.ok.Add(1)
				l.acked[k].Add(1)
			}
		}()
	}
}

// rollingRestart restarts every member, one at a time, under load: each
// leaves the rotation, gets SIGTERM, is started again once it exited, and is put back once
// every member's status has settled. It returns the requests failed and the keys whose
// count is not what was acknowledged.
func rollingRestart(bin string, ms []*member) string {
	var live []*member
	for _, m := range ms {
		if !m.dead {
			live = append(live, m)
		}
	}
	rot := &rotation{in: live}
	l := &load{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	l.run(rot, stop, &wg)
	start := time.Now()
	for _, m := range live {
		rot.set(without(live, m))
		time.Sleep(200 * time.Millisecond) // its requests in flight answered
		m.cmd.Process.Signal(syscall.SIGTERM)
		m.cmd.Wait()
		if err := m.start(bin); err != nil {
			close(stop)
			wg.Wait()
			return "restart: " + err.Error()
		}
		if _, err := until(2*time.Minute, func() error {
			if err := readyz(m); err != nil {
				return err
			}
			return all(live, settledAt)
		}); err != nil {
			close(stop)
			wg.Wait()
			return "not settled: " + strings.ReplaceAll(err.Error(), "|", "/")
		}
		rot.set(live)
	}
	close(stop)
	wg.Wait()
	took := time.Since(start)
	wrong := 0
	for k := range l.acked {
		n, err := count(live[0], fmt.Sprintf("rolling:%d", k))
		if acked := l.acked[k].Load(); err != nil || n < acked || n > acked+l.unknown[k].Load() {
			wrong++
		}
	}
	out := fmt.Sprintf("%d members in %.0f s: %d requests, %d failed, %d of %d keys' counts outside acknowledged ≤ count ≤ acknowledged + unknown",
		len(live), took.Seconds(), l.ok.Load()+l.failed.Load(), l.failed.Load(), wrong, len(l.acked))
	if e := l.firstErr.Load(); e != nil {
		out += " (first failure: " + strings.ReplaceAll(e.(string), "|", "/") + ")"
	}
	return out
}

func without(ms []*member, m *member) []*member {
	var out []*member
	for _, x := range ms {
		if x != m {
			out = append(out, x)
		}
	}
	return out
}

// count reads key's count through m.
func count(m *member, key string) (int64, error) {
	resp, err := client.Get("http://" + m.http + "/v1/count?key=" + key + "&window=1h")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("count %s: %d", key, resp.StatusCode)
	}
	var v struct{ Count int64 }
	err = json.NewDecoder(resp.Body).Decode(&v)
	return v.Count, err
}
