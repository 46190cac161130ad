package proctest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// tagPrefix starts the comment of every iptables rule a test adds; the process id
// follows, so that Main can remove the rules of a test process that died.
const tagPrefix = "leapcount-test-"

// Firewall cuts traffic between node processes on loopback with iptables rules in the
// OUTPUT chain (loopback packets pass it once). Every rule carries the comment
// leapcount-test-<pid>; Heal removes them, and so does the test's cleanup, whatever
// way the test ends. Nodes need Options.OwnAddrs, so that each has its own address
// and dials from it. It needs root and iptables; without them the test fails.
type Firewall struct {
	t     testing.TB
	tag   string
	mu    sync.Mutex
	rules [][]string
}

// NewFirewall returns a Firewall whose rules go when the test ends.
func NewFirewall(t testing.TB) *Firewall {
	t.Helper()
	if out, err := exec.Command("iptables", "-w", "-S", "OUTPUT").CombinedOutput(); err != nil {
		t.Fatalf("proctest: network fault tests need root and iptables: %v: %s", err, out)
	}
	f := &Firewall{t: t, tag: tagPrefix + strconv.Itoa(os.Getpid())}
	t.Cleanup(f.Heal)
	return f
}

// Cut drops every packet between a and b, both ways: a network partition.
func (f *Firewall) Cut(a, b *Node) {
	f.t.Helper()
	f.add("-s", a.Host(), "-d", b.Host())
	f.add("-s", b.Host(), "-d", a.Host())
}

// Isolate cuts n from every other node of c.
func (f *Firewall) Isolate(c *Cluster, n *Node) {
	f.t.Helper()
	for _, m := range c.Nodes() {
		if m != n {
			f.Cut(n, m)
		}
	}
}

// DropReplies drops what n sends from its rpc port: its answers to forwarded ops (and
// to heartbeats) are lost while the requests still reach it.
func (f *Firewall) DropReplies(n *Node) {
	f.t.Helper()
	_, port, err := net.SplitHostPort(n.Addrs().RPC)
	if err != nil {
		f.t.Fatalf("proctest: %s has no rpc address: %v", n.Name(), err)
	}
	f.add("-s", n.Host(), "-p", "tcp", "--sport", port)
}

// DropTCP drops the TCP segments sent on loopback from port from to port to: one
// direction of one connection (a Redis master's replication stream to a replica, say).
func (f *Firewall) DropTCP(from, to int) {
	f.t.Helper()
	f.add("-o", "lo", "-p", "tcp", "--sport", strconv.Itoa(from), "--dport", strconv.Itoa(to))
}

func (f *Firewall) add(match ...string) {
	f.t.Helper()
	rule := append(append([]string{}, match...), "-m", "comment", "--comment", f.tag, "-j", "DROP")
	if out, err := exec.Command("iptables", append([]string{"-w", "-I", "OUTPUT"}, rule...)...).CombinedOutput(); err != nil {
		f.t.Fatalf("proctest: iptables -I OUTPUT %s: %v: %s", strings.Join(rule, " "), err, out)
	}
	f.mu.Lock()
	f.rules = append(f.rules, rule)
	f.mu.Unlock()
}

// Heal removes every rule this Firewall added.
func (f *Firewall) Heal() {
	f.mu.Lock()
	rules := f.rules
	f.rules = nil
	f.mu.Unlock()
	for _, r := range rules {
		if out, err := exec.Command("iptables", append([]string{"-w", "-D", "OUTPUT"}, r...)...).CombinedOutput(); err != nil {
			f.t.Errorf("proctest: iptables -D OUTPUT %s: %v: %s", strings.Join(r, " "), err, out)
		}
	}
}

// removeStaleRules deletes the tagged rules of test processes that no longer run (one
// killed before its cleanup could run).
func removeStaleRules() {
	out, err := exec.Command("iptables", "-w", "-S", "OUTPUT").Output()
	if err != nil {
		return
	}
	for _, line := range bytes.Split(out, []byte("\n")) {
		i := bytes.Index(line, []byte(tagPrefix))
		if i < 0 || !bytes.HasPrefix(line, []byte("-A OUTPUT ")) {
			continue
		}
		pid, err := strconv.Atoi(strings.Fields(string(line[i+len(tagPrefix):]))[0])
		if err != nil || processAlive(pid) {
			continue
		}
		args := append([]string{"-w", "-D", "OUTPUT"}, strings.Fields(string(line[len("-A OUTPUT "):]))...)
		if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "proctest: removing a stale rule: %v: %s\n", err, out)
		}
	}
}

func processAlive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}
