// Command fleet measures what a cluster costs as it grows, with real node processes on
// this machine's loopback: for each size, how long after the last node answers /readyz
// every node's status settles, each node's CPU while idle, and, killing a member that is
// not a voter and then a voter with SIGKILL, how long until every other node's status
// settles again and until every key answers; then, under load, a rolling restart of
// every member (each taken out of the clients' rotation, stopped with
// SIGTERM, started again and put back once settled): requests failed, and every key's
// count against the increments acknowledged. It prints one markdown table (make
// bench-fleet; BENCHMARKS.md, docs/cluster.md).
package main

import (
	"context"
	"encoding/json"

	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leapcount/leapcount/node"
)

func main() {
	bin := flag.String("node", "bin/node", "the node binary")
	sizes := flag.String("sizes", "3,24", "cluster sizes to measure, in order")
	idle := flag.Duration("idle", 20*time.Second, "how long to measure idle CPU")
	base := flag.Int("port", 21000, "first port; each node takes ten from here")
	flag.Parse()
	fmt.Println("| members | settle after the last /readyz | idle CPU per node (mean; voters; others) | kill -9 of a non-voter: status / keys | kill -9 of a voter: status / keys | rolling restart under load |")
	fmt.Println("| --- | --- | --- | --- | --- | --- |")
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 3 {
			fmt.Fprintf(os.Stderr, "fleet: bad size %q\n", s)
			os.Exit(2)
		}
		row, err := measure(*bin, n, *base, *idle)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fleet: %d members: %v\n", n, err)
			os.Exit(1)
		}
		fmt.Println(row)
	}
}

// member is one node process.
type member struct {
	name string
	http string
	args []string
	out  io.Writer
	cmd  *exec.Cmd
	dead bool
}

// start runs the member's process.
func (m *member) start(bin string) error {
	m.cmd = exec.Command(bin, m.args...)
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	m.dead = false
	return m.cmd.Start()
}

func measure(bin string, n, base int, idle time.Duration) (string, error) {
	ms := make([]*member, n)
	var join []string
	for i := range min(n, 3) {
		join = append(join, fmt.Sprintf("127.0.0.1:%d", base+10*i+2))
	}
	logs, err := os.Create(filepath.Join(os.TempDir(), fmt.Sprintf("fleet-%d.log", n))) // the nodes' logs, kept for a look
	if err != nil {
		return "", err
	}
	defer logs.Close()
	for i := range ms {
		p := base + 10*i
		m := &member{name: fmt.Sprintf("f%02d", i), http: fmt.Sprintf("127.0.0.1:%d", p), out: logs}
		m.args = []string{"--name", m.name, "--http", m.http, "--resp", fmt.Sprintf("127.0.0.1:%d", p+1),
			"--gossip", fmt.Sprintf("127.0.0.1:%d", p+2), "--rpc", fmt.Sprintf("127.0.0.1:%d", p+3), "--join", strings.Join(join, ",")}
		if err := m.start(bin); err != nil {
			return "", err
		}
		ms[i] = m
	}
	defer stopAll(ms)
	ready, err := until(2*time.Minute, func() error { return all(ms, readyz) })
	if err != nil {
		return "", fmt.Errorf("not all ready: %w", err)
	}
	settled, err := until(5*time.Minute, func() error { return all(ms, settledAt) })
	if err != nil {
		return "", fmt.Errorf("not settled: %w", err)
	}
	time.Sleep(5 * time.Second) // the last moves' handoffs and loads done
	voters, err := votersOf(ms[0])
	if err != nil {
		return "", err
	}
	cpu := idleCPU(ms, voters, idle)
	rolling := rollingRestart(bin, ms)
	if voters, err = votersOf(ms[0]); err != nil {
		return "", err
	}
	keys := writeKeys(ms[0], 300)
	killOther := kill(ms, voters, false, keys)
	killVoter := kill(ms, voters, true, keys)
	return fmt.Sprintf("| %d | %.1f s | %s | %s | %s | %s |", n, settled.Sub(ready).Seconds(), cpu, killOther, killVoter, rolling), nil
}

// until polls f until it returns nil, and returns when that was.
func until(limit time.Duration, f func() error) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// all applies f to every member alive, the first error first.
func all(ms []*member, f func(*member) error) error {
	for _, m := range ms {
		if !m.dead {
			if err := f(m); err != nil {
				return err
			}
		}
	}
	return nil
}

var client = &http.Client{Timeout: 2 * time.Second}

func readyz(m *member) error {
	resp, err := client.Get("http://" + m.http + "/readyz")
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: /readyz %d", m.name, resp.StatusCode)
	}
	return nil
}

func status(m *member) (*node.StatusView, error) {
	resp, err := client.Get("http://" + m.http + "/v1/status")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var s node.StatusView
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: /v1/status: %w", m.name, err)
	}
	return &s, nil
}

// settledAt is what leapcount-node status exits 0 on: no problem listed.
func settledAt(m *member) error {
	s, err := status(m)
	if err != nil {
		return err
	}
	if len(s.Problems) > 0 {
		return fmt.Errorf("%s: %s", m.name, s.Problems[0])
	}
	return nil
}

func votersOf(m *member) (map[string]bool, error) {
	s, err := status(m)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, v := range s.Cluster.Members {
		if v.Voter {
			out[v.Name] = true
		}
	}
	return out, nil
}

// idleCPU is each member's share of a core over span: mean, voters', others'.
func idleCPU(ms []*member, voters map[string]bool, span time.Duration) string {
	before := make([]time.Duration, len(ms))
	for i, m := range ms {
		before[i] = cpuOf(m.cmd.Process.Pid)
	}
	start := time.Now()
	time.Sleep(span)
	wall := time.Since(start)
	var sum, sumV, sumO float64
	var nV, nO int
	for i, m := range ms {
		pct := 100 * float64(cpuOf(m.cmd.Process.Pid)-before[i]) / float64(wall)
		sum += pct
		if voters[m.name] {
			sumV, nV = sumV+pct, nV+1
		} else {
			sumO, nO = sumO+pct, nO+1
		}
	}
	others := "-"
	if nO > 0 {
		others = fmt.Sprintf("%.2f%%", sumO/float64(nO))
	}
	return fmt.Sprintf("%.2f%% (%.2f%%; %s)", sum/float64(len(ms)), sumV/float64(max(nV, 1)), others)
}

// cpuOf is a process's user and system CPU so far (/proc/<pid>/stat, in clock ticks of
// 10 ms).
func cpuOf(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// writeKeys counts one op on each of n keys through m, and returns the keys.
func writeKeys(m *member, n int) []string {
	var keys []string
	for i := range n {
		k := fmt.Sprintf("fleet:%d", i)
		incr(m, k)
		keys = append(keys, k)
	}
	return keys
}

func incr(m *member, key string) error { return incrOn(client, m, key) }

// incrOn counts one op on key (window 1h) through m with c.
func incrOn(c *http.Client, m *member, key string) error {
	resp, err := c.Post("http://"+m.http+"/v1/incr", "application/json", strings.NewReader(`{"key":"`+key+`","window":"1h"}`))
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("incr %s through %s: %d %s", key, m.name, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// kill sends SIGKILL to a member (a voter, or one that is not) and says how long until
// every other member's status settles and until every key answers through one of them.
func kill(ms []*member, voters map[string]bool, voter bool, keys []string) string {
	via := ms[0] // the founder, a voter, never the victim
	var victim *member
	for _, m := range ms[1:] {
		if !m.dead && voters[m.name] == voter {
			victim = m
			break
		}
	}
	if victim == nil {
		return "-"
	}
	victim.cmd.Process.Signal(syscall.SIGKILL)
	victim.cmd.Wait()
	victim.dead = true
	start := time.Now()
	keysAt, errK := until(time.Minute, func() error {
		for _, k := range keys {
			if err := incr(via, k); err != nil {
				return err
			}
		}
		return nil
	})
	statusAt, errS := until(time.Minute, func() error { return all(ms, settledAt) })
	return fmt.Sprintf("%s / %s", since(start, statusAt, errS), since(start, keysAt, errK))
}

func since(start, at time.Time, err error) string {
	if err != nil {
		return "not in 1 min: " + strings.ReplaceAll(err.Error(), "|", "/")
	}
	return fmt.Sprintf("%.1f s", at.Sub(start).Seconds())
}

// stopAll stops every member at once with SIGTERM, and kills any still up 30 s later.
func stopAll(ms []*member) {
	for _, m := range ms {
		if !m.dead {
			m.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, m := range ms {
		if m.dead {
			continue
		}
		done := make(chan error, 1)
		go func() { done <- m.cmd.Wait() }()
		select {
		case <-done:
		case <-ctx.Done():
			m.cmd.Process.Kill()
			<-done
		}
	}
}
