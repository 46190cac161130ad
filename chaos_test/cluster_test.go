package chaos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/internal/testkit/faultload"
	"github.com/leapcount/leapcount/internal/testkit/proctest"
	"github.com/leapcount/leapcount/ring"
)

// partitions is the ring's partition count (package ring's default).
const partitions = ring.DefaultPartitionCount

// Three processes started with --join form one cluster in which every node, over HTTP
// and RESP, answers every counter exactly, and concurrent allows through all three
// admit exactly the limit.
func TestThreeProcessesAnswerExactly(t *testing.T) {
	start := time.Now()
	s := seed(t)
	c := proctest.StartCluster(t, 3, proctest.Options{})
	t.Logf("three processes converged %v after the start (build included)", time.Since(start).Round(time.Millisecond))
	checkMembership(t, c)

	g := faultload.New(faultload.Config{Keys: 2000, Workers: 6, Seed: s}, c.RESPAddrs()...)
	defer g.Close()
	g.Start(20*time.Second, 20_000)
	st := g.Wait()
	if st.Acked != st.Sent || st.Acked == 0 {
		t.Fatalf("RESP incr: sent %d, acked %d, failed %d, unknown %d (errors %v); want every one acked",
			st.Sent, st.Acked, st.Failed, st.Unknown, g.Errors())
	}
	t.Logf("RESP incr: %d acked in %v (%.0f/s)", st.Acked, st.Elapsed.Round(time.Millisecond), st.Rate())
	tallies := g.Snapshot()
	ctx := context.Background()
	for _, n := range c.Nodes() {
		for _, counter := range []faultload.Counter{faultload.HTTPCounter{Addr: n.HTTP(), Client: httpClient}, faultload.RESPCounter{Addr: n.RESP()}} {
			r, _, err := faultload.Check(ctx, counter, tallies, nil, g.Window())
			if err != nil {
				t.Fatal(err)
			}
			if r.Exact != r.Keys {
				t.Errorf("through %s (%T): %v; want every key exact", n.Name(), counter, r)
			}
		}
	}

	httpIncrExact(t, c, rand.New(rand.NewPCG(s, 1)), fmt.Sprintf("http:%d:", s))
	allowAdmitsLimit(t, c, fmt.Sprintf("allow:%d", s))
	t.Logf("test took %v", time.Since(start).Round(time.Millisecond))
}

// checkMembership wants every node to list the three as alive, their shares adding up
// to all partitions, and the same epoch everywhere.
func checkMembership(t *testing.T, c *proctest.Cluster) {
	t.Helper()
	var epoch string
	for i, n := range c.Nodes() {
		v, err := n.View()
		if err != nil {
			t.Fatal(err)
		}
		if got := len(v.Alive()); got != 3 {
			t.Errorf("%s: %d alive members %v; want 3", n.Name(), got, v.Alive())
		}
		if v.Partitions != partitions || v.Shares() != partitions {
			t.Errorf("%s: partitions %d, shares add up to %d; want %d and %d", n.Name(), v.Partitions, v.Shares(), partitions, partitions)
		}
		for _, m := range v.Members {
			if m.Partitions == 0 {
				t.Errorf("%s: member %s owns no partition", n.Name(), m.Name)
			}
		}
		if i == 0 {
			epoch = v.Epoch
		} else if v.Epoch != epoch {
			t.Errorf("%s: epoch %s; node-0 has %s", n.Name(), v.Epoch, epoch)
		}
	}
}

// httpIncrExact increments keys with POST /v1/incr (random n) through random nodes and
// reads each back with GET /v1/count through every node.
func httpIncrExact(t *testing.T, c *proctest.Cluster, rng *rand.Rand, prefix string) {
	t.Helper()
	nodes := c.Nodes()
	want := map[string]int64{}
	for i := 0; i < 600; i++ {
		key := fmt.Sprintf("%s%d", prefix, rng.IntN(150))
		n := 1 + rng.Int64N(5)
		body, _ := json.Marshal(map[string]any{"key": key, "window": "10m", "n": n})
		var got struct{ Count int64 }
		if err := httpJSON(http.MethodPost, nodes[rng.IntN(len(nodes))].HTTP(), "/v1/incr", body, &got); err != nil {
			t.Fatal(err)
		}
		want[key] += n
		if got.Count != want[key] {
			t.Fatalf("incr %q by %d: got count %d; want %d", key, n, got.Count, want[key])
		}
	}
	for key, w := range want {
		for _, n := range nodes {
			var got struct{ Count int64 }
			if err := httpJSON(http.MethodGet, n.HTTP(), "/v1/count?window=10m&key="+url.QueryEscape(key), nil, &got); err != nil {
				t.Fatal(err)
			}
			if got.Count != w {
				t.Errorf("GET /v1/count %q through %s: got %d; want %d", key, n.Name(), got.Count, w)
			}
		}
	}
}

func httpJSON(method, addr, path string, body []byte, out any) error {
	req, err := http.NewRequest(method, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s on %s: %d %s", method, path, addr, resp.StatusCode, data)
	}
	return json.Unmarshal(data, out)
}

// allowAdmitsLimit sends SW.ALLOW concurrently through all nodes, twice as many as the
// limit, and wants exactly limit admitted and counted on every node.
func allowAdmitsLimit(t *testing.T, c *proctest.Cluster, key string) {
	t.Helper()
	const limit, perWorker, workersPerNode = 300, 50, 4
	var allowed, denied atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for _, n := range c.Nodes() {
		cl := redis.NewClient(&redis.Options{Addr: n.RESP(), Protocol: 2, MaxRetries: -1, DisableIdentity: true})
		defer cl.Close()
		for w := 0; w < workersPerNode; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < perWorker; i++ {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					v, err := cl.Do(ctx, "SW.ALLOW", key, "10m", limit).Int64Slice()
					cancel()
					if err != nil || len(v) != 4 || v[1] < 0 { // count -1: the fail policy's answer, not a decision
						select {
						case errs <- fmt.Errorf("SW.ALLOW through %s: %v %v", n.Name(), v, err):
						default:
						}
						return
					}
					if v[0] == 1 {
						allowed.Add(1)
					} else {
						denied.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	total := int64(len(c.Nodes()) * workersPerNode * perWorker)
	if allowed.Load() != limit || allowed.Load()+denied.Load() != total {
		t.Errorf("concurrent SW.ALLOW: got %d allowed, %d denied; want %d allowed of %d", allowed.Load(), denied.Load(), limit, total)
	}
	for _, n := range c.Nodes() {
		got, err := faultload.RESPCounter{Addr: n.RESP()}.Counts(context.Background(), []string{key}, "10m")
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != limit {
			t.Errorf("SW.COUNT %s through %s: got %d; want %d", key, n.Name(), got[0], limit)
		}
	}
}
