package chaos_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leapcount/leapcount/internal/testkit/proctest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// A flood of 200k distinct keys (RESP pipelines) at a node started with --max-counters
// 50000 that already holds 1000 counters: the node never holds more than the cap, new
// keys past it get "-ERR counter table full", the counters it held keep counting
// exactly, and once the flood's counters have left their window new keys are admitted
// again.
func TestFloodStaysUnderMaxCounters(t *testing.T) {
	const maxCounters, existing, flood, floodWindow = 50_000, 1000, 200_000, 20 * time.Second
	c := proctest.StartCluster(t, 1, proctest.Options{Args: []string{"--max-counters", strconv.Itoa(maxCounters)}})
	n := c.Node(0)
	rdb := respClient(n.RESP())
	defer rdb.Close()
	users := keys("user:", existing)
	if r, _ := pipelineIncr(rdb, users, "1m"); r.ok != existing {
		t.Fatalf("existing counters: %v; want %d counted", r, existing)
	}
	start := time.Now()
	r, _ := pipelineIncr(rdb, keys("flood:", flood), floodWindow.String())
	took := time.Since(start)
	rss, _ := n.RSS()
	t.Logf("flood of %d keys in %v: %v; RSS %d MiB", flood, took.Round(time.Millisecond), r, rss>>20)
	if took >= floodWindow/2 {
		t.Fatalf("the flood took %v: its first counters may have left their %v window; the test proves nothing", took, floodWindow)
	}
	if r.ok != maxCounters-existing || r.full != flood-r.ok || len(r.other) > 0 {
		t.Errorf("flood: %v; want %d counted and the rest answered \"counter table full\"", r, maxCounters-existing)
	}
	if units := metric(t, n.HTTP(), "leapcount_store_units"); units != maxCounters {
		t.Errorf("leapcount_store_units after the flood: got %d; want %d", units, maxCounters)
	}
	if r, _ := pipelineIncr(rdb, users, "1m"); r.ok != existing {
		t.Errorf("existing counters during the flood: %v; want every one counted", r)
	}
	wantCounts(t, rdb, users, "1m", 2)
	newKeyFull(t, n.HTTP())

	// As the flood's counters leave their window, new ones take their place, until all
	// are in; a refused SW.INCR was not applied, so sending it again counts it once.
	left := keys("again:", maxCounters-existing)
	if err := wait.Until(floodWindow+30*time.Second, func() error {
		// One key at a time until one is admitted, so as not to load the node meanwhile.
		if err := rdb.Do(context.Background(), "SW.INCR", left[0], "1m").Err(); err != nil {
			return err
		}
		if r, left = pipelineIncr(rdb, left[1:], "1m"); len(left) > 0 {
			return fmt.Errorf("%d new keys still refused (%v)", len(left), r)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v after the flood began: %v", time.Since(start).Round(time.Second), err)
	}
	t.Logf("all %d new keys admitted %v after the flood began", maxCounters-existing, time.Since(start).Round(time.Millisecond))
	wantCounts(t, rdb, keys("again:", maxCounters-existing), "1m", 1)
	wantCounts(t, rdb, users, "1m", 2)
	if units := metric(t, n.HTTP(), "leapcount_store_units"); units != maxCounters {
		t.Errorf("leapcount_store_units at the end: got %d; want %d", units, maxCounters)
	}
}

func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

// newKeyFull checks what HTTP clients get for a new counter on a full node: incr is 503
// "counter table full"; allow is answered by the fail policy (denied, the default),
// marked as its answer and counted.
func newKeyFull(t *testing.T, addr string) {
	t.Helper()
	resp, err := httpClient.Post("http://"+addr+"/v1/incr", "application/json", strings.NewReader(`{"key":"one-more","window":"1m"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := readAll(resp)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "counter table full") {
		t.Errorf("incr of a new key on a full node: got %d %s; want 503 counter table full", resp.StatusCode, body)
	}
	const answers = `leapcount_fail_policy_answers_total{policy="closed"}`
	before := metric(t, addr, answers)
	var got struct {
		Allowed    bool
		Count      int64
		FailPolicy string `json:"fail_policy"`
		Reason     string
	}
	if err := httpJSON(http.MethodPost, addr, "/v1/allow", []byte(`{"key":"one-more","window":"1m","limit":5}`), &got); err != nil ||
		got.Allowed || got.Count != -1 || got.FailPolicy != "closed" || !strings.Contains(got.Reason, "counter table full") {
		t.Errorf("allow of a new key on a full node: got %+v, %v; want denied by the fail policy for a full table, count -1", got, err)
	}
	if n := metric(t, addr, answers); n != before+1 {
		t.Errorf("%s: got %d; want %d", answers, n, before+1)
	}
}

// pipelined is what pipelineIncr counted: ops answered with a count, refused as full,
// and the first few other errors.
type pipelined struct {
	ok, full int
	other    []string
}

func (p pipelined) String() string {
	return fmt.Sprintf("%d counted, %d full, other errors %q", p.ok, p.full, p.other)
}

// pipelineIncr sends SW.INCR key window for every key, in pipelines of 1000 on two
// connections, and returns what it counted and the keys that were not counted.
func pipelineIncr(rdb *redis.Client, keys []string, window string) (pipelined, []string) {
	const batch, conns = 1000, 2
	var mu sync.Mutex
	var out pipelined
	var failed []string
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for from := int(next.Add(batch)) - batch; from < len(keys); from = int(next.Add(batch)) - batch {
				pipe := rdb.Pipeline()
				part := keys[from:min(from+batch, len(keys))]
				for _, k := range part {
					pipe.Do(context.Background(), "SW.INCR", k, window)
				}
				cmds, _ := pipe.Exec(context.Background())
				mu.Lock()
				for i, cmd := range cmds {
					switch err := cmd.Err(); {
					case err == nil:
						out.ok++
						continue
					case strings.Contains(err.Error(), "counter table full"):
						out.full++
					case len(out.other) < 3:
						out.other = append(out.other, err.Error())
					}
					failed = append(failed, part[i])
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out, failed
}

// wantCounts reads every key and wants each to count want.
func wantCounts(t *testing.T, rdb *redis.Client, keys []string, window string, want int64) {
	t.Helper()
	pipe := rdb.Pipeline()
	for _, k := range keys {
		pipe.Do(context.Background(), "SW.COUNT", k, window)
	}
	cmds, err := pipe.Exec(context.Background())
	if err != nil {
		t.Fatalf("SW.COUNT: %v", err)
	}
	for i, cmd := range cmds {
		if got, err := cmd.(*redis.Cmd).Int64(); err != nil || got != want {
			t.Fatalf("count of %s: got %d, %v; want %d", keys[i], got, err, want)
		}
	}
}

func respClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, PoolSize: 4,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, DisableIdentity: true})
}

// metric reads one unlabelled metric from the node's /metrics.
func metric(t *testing.T, addr, name string) int64 {
	t.Helper()
	resp, err := httpClient.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return int64(f)
		}
	}
	t.Fatalf("no metric %s at %s", name, addr)
	return 0
}

func readAll(resp *http.Response) (string, error) {
	defer resp.Body.Close()
	var b strings.Builder
	_, err := bufio.NewReader(resp.Body).WriteTo(&b)
	return b.String(), err
}

// A node filled with 1M counters of a short window, then left idle, gives the memory
// back to the OS once its sweeps have forgotten them: its RSS falls well below the
// peak (without the return it stayed at the peak: nothing allocates, so no collection
// runs, and the scavenger is slow).
func TestMemoryGoesBackAfterCountersExpire(t *testing.T) {
	const counters, window = 1_000_000, 30 * time.Second // the fill took 11.7 s at load 6 here
	c := proctest.StartCluster(t, 1, proctest.Options{Args: []string{"--max-counters", "2000000", "--sweep-interval", "100ms"}})
	n := c.Node(0)
	rdb := respClient(n.RESP())
	defer rdb.Close()
	base, err := n.RSS()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if r, _ := pipelineIncr(rdb, keys("k", counters), window.String()); r.ok != counters {
		t.Fatalf("fill: %v; want %d counted", r, counters)
	}
	filled := time.Now()
	peak, _ := n.RSS()
	held := metric(t, n.HTTP(), "leapcount_counters")
	t.Logf("filled %d counters in %v (%d held at the end): RSS %d MiB, %d MiB before", counters,
		filled.Sub(start).Round(time.Millisecond), held, peak>>20, base>>20)
	if held < counters*9/10 {
		t.Fatalf("only %d counters held after the fill: the window is too short for this machine; the test proves nothing", held)
	}
	bound := base + (peak-base)/4
	var settled int64
	if err := wait.Until(window+60*time.Second, func() error {
		if settled, err = n.RSS(); err != nil || settled > bound {
			return fmt.Errorf("RSS %d MiB; want at most %d MiB (%v)", settled>>20, bound>>20, err)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v after the fill: %v", time.Since(filled).Round(time.Second), err)
	}
	t.Logf("RSS peak %d MiB, settled %d MiB (bound %d MiB) %v after the fill, %d counters left", peak>>20, settled>>20,
		bound>>20, time.Since(filled).Round(time.Millisecond), metric(t, n.HTTP(), "leapcount_counters"))
	// Which of the node's FreeOSMemory and Go's own GC and scavenger got there first
	// depends on the machine's load; what matters is that RSS follows the live counters.
	log, _ := os.ReadFile(n.LogPath())
	t.Logf("the node logged giving memory back to the OS: %v", strings.Contains(string(log), "given back to the OS"))
}
