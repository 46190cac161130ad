package proctest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Timeouts of the harness: generous, for a loaded two-core machine.
const (
	StartTimeout    = 30 * time.Second // from exec to the "node serving" line
	StopTimeout     = 30 * time.Second // from SIGTERM to exit (the node's own bound is 10s)
	ConvergeTimeout = 45 * time.Second // default of Options.ConvergeTimeout
)

// Addrs are the addresses a node process has bound.
type Addrs struct {
	HTTP, RESP, RPC, Gossip string
	RESPCluster             string // set with Options.RESPCluster
	GRPC                    string // set with Options.GRPC
}

// Node is one named node of a Cluster: one process at a time (Restart starts another
// under the same name).
type Node struct {
	c       *Cluster
	name    string
	logPath string

	mu     sync.Mutex
	proc   *process // the current or last process; nil before the first start
	addrs  Addrs
	paused bool
}

// process is one run of the binary.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and been reaped
	err  error         // cmd.Wait's result, readable once done is closed
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Name is the node's member name (node-i).
func (n *Node) Name() string { return n.name }

// Host is the IP the node binds: 127.0.0.(i+2) with Options.OwnAddrs, else 127.0.0.1.
func (n *Node) Host() string {
	if !n.c.opts.OwnAddrs {
		return "127.0.0.1"
	}
	var i int
	fmt.Sscanf(n.name, "node-%d", &i)
	return fmt.Sprintf("127.0.0.%d", i+2)
}

// LogPath is the file the node's output goes to (all its runs, appended).
func (n *Node) LogPath() string { return n.logPath }

// Addrs are the addresses of the current (or last) process.
func (n *Node) Addrs() Addrs {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addrs
}

// HTTP is the node's HTTP address, host:port.
func (n *Node) HTTP() string { return n.Addrs().HTTP }

// GRPC is the node's gRPC address, host:port (Options.GRPC).
func (n *Node) GRPC() string { return n.Addrs().GRPC }

// RESP is the node's RESP address, host:port.
func (n *Node) RESP() string { return n.Addrs().RESP }

// Gossip is the node's memberlist address, host:port.
func (n *Node) Gossip() string { return n.Addrs().Gossip }

// Running reports whether the node's process runs (paused or not).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc != nil && !n.proc.exited()
}

// Paused reports whether the node's process is frozen by Pause.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused && n.proc != nil && !n.proc.exited()
}

// Pid is the process id of the current (or last) process.
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return 0
	}
	return n.proc.cmd.Process.Pid
}

// launch starts a process bound to addrs (empty fields: port 0) that joins join, and
// waits for its "node serving" line.
func (n *Node) launch(addrs Addrs, join []string) error {
	orZero := func(s string) string {
		if s == "" {
			return n.Host() + ":0"
		}
		return s
	}
	args := []string{"--name", n.name, "--http", orZero(addrs.HTTP), "--resp", orZero(addrs.RESP),
		"--rpc", orZero(addrs.RPC), "--gossip", orZero(addrs.Gossip), "--log-format", "json"}
	if n.c.opts.RESPCluster {
		args = append(args, "--resp-cluster", orZero(addrs.RESPCluster))
	}
	if n.c.opts.GRPC {
		args = append(args, "--grpc", orZero(addrs.GRPC))
	}
	if len(join) > 0 {
		args = append(args, "--join", strings.Join(join, ","))
	}
	args = append(args, n.c.opts.Args...)
	if n.c.opts.Ratelimit {
		args = append([]string{"ratelimit"}, args...)
	}
	if more := os.Getenv("LEAPCOUNT_TEST_NODE_ARGS"); more != "" {
		args = append(args, strings.Fields(more)...) // for a hunt: --log-level debug, say
	}
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close() // the child has its own descriptor
	st, err := f.Stat()
	if err != nil {
		return err
	}
	offset := st.Size()
	fmt.Fprintf(f, "=== proctest %s: %s %s\n", time.Now().Format(time.RFC3339Nano), n.c.bin, strings.Join(args, " "))
	cmd := exec.Command(n.c.bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), n.c.opts.Env...)
	if n.c.opts.Token != "" {
		cmd.Env = append(cmd.Env, "LEAPCOUNT_TOKEN="+n.c.opts.Token)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	n.mu.Lock()
	n.proc, n.paused = p, false
	n.mu.Unlock()
	got, err := awaitServing(n.logPath, offset, p)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.addrs = got
	n.mu.Unlock()
	return nil
}

// signal sends sig to the current process; it is an error if none runs.
func (n *Node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	if p == nil || p.exited() {
		return fmt.Errorf("%s: %v: no process runs", n.name, sig)
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: %v: %v", n.name, sig, err)
	}
	return nil
}

// waitExit waits up to d for the current process to exit and returns its Wait error
// (nil: exit code 0).
func (n *Node) waitExit(d time.Duration) error {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		return fmt.Errorf("%s (pid %d) still running %v later", n.name, p.cmd.Process.Pid, d)
	}
}

// Stop sends SIGTERM (and SIGCONT, should the node be paused) and waits for the
// process to exit; the test fails unless it exits 0 within StopTimeout.
func (n *Node) Stop() {
	n.c.t.Helper()
	if err := n.signal(syscall.SIGTERM); err != nil {
		n.c.t.Fatalf("proctest: stop: %v", err)
	}
	if n.Paused() {
		n.Resume()
	}
	if err := n.waitExit(StopTimeout); err != nil {
		n.forceKill()
		n.c.t.Fatalf("proctest: %s after SIGTERM: %v; want exit 0\n%s", n.name, err, n.LogTail(4096))
	}
}

// Kill sends SIGKILL (a crash: no leave, no flush) and waits for the process to exit.
func (n *Node) Kill() {
	n.c.t.Helper()
	if err := n.signal(syscall.SIGKILL); err != nil {
		n.c.t.Fatalf("proctest: kill: %v", err)
	}
	if err := n.waitExit(StopTimeout); err != nil && !isSignaled(err) {
		n.c.t.Fatalf("proctest: %s after SIGKILL: %v", n.name, err)
	}
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
}

// forceKill kills the process if it runs, ignoring errors (cleanup).
func (n *Node) forceKill() {
	if n.signal(syscall.SIGKILL) == nil {
		_ = n.waitExit(StopTimeout)
	}
}

func isSignaled(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// Pause freezes the process (SIGSTOP): its sockets stay open, nothing answers.
func (n *Node) Pause() {
	n.c.t.Helper()
	if err := n.signal(syscall.SIGSTOP); err != nil {
		n.c.t.Fatalf("proctest: pause: %v", err)
	}
	// kill returns before every thread has stopped; wait until the kernel says so.
	pid := n.Pid()
	deadline := time.Now().Add(10 * time.Second)
	for !stopped(pid) {
		if time.Now().After(deadline) {
			n.c.t.Fatalf("proctest: pause: pid %d not stopped after 10s", pid)
		}
		time.Sleep(time.Millisecond)
	}
	n.mu.Lock()
	n.paused = true
	n.mu.Unlock()
}

// Resume lets a paused process run again (SIGCONT).
func (n *Node) Resume() {
	n.c.t.Helper()
	if err := n.signal(syscall.SIGCONT); err != nil {
		n.c.t.Fatalf("proctest: resume: %v", err)
	}
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
}

// Restart starts the node again under the same name, on the same ports when they can
// be bound again (else on new ones), joining the live nodes. A node that still runs is
// stopped first with Stop. It waits for the new process to serve, not for the cluster
// to converge (WaitConverged does).
func (n *Node) Restart() {
	n.c.t.Helper()
	if n.Running() {
		n.Stop()
	}
	old := n.Addrs()
	var join []string
	if !n.c.opts.NoJoin {
		join = n.c.joinAddrs(n)
	}
	err := n.launch(old, join)
	if err != nil && !n.Running() {
		n.c.t.Logf("proctest: %s cannot restart on its old ports (%v); trying new ones", n.name, err)
		err = n.launch(Addrs{}, join)
	}
	if err != nil {
		n.forceKill()
		n.c.t.Fatalf("proctest: restart %s: %v\n%s", n.name, err, n.LogTail(4096))
	}
}

// LogLines returns the lines of the node's log that contain substr, at most max of
// them (the last ones), each prefixed by the node's name.
func (n *Node) LogLines(substr string, max int) []string {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return []string{fmt.Sprintf("(%s: no log: %v)", n.name, err)}
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, substr) {
			out = append(out, n.name+": "+strings.TrimSuffix(line, "\n"))
		}
	}
	return out[len(out)-min(max, len(out)):]
}

// LogTail is the last max bytes of the node's log, for failure messages.
func (n *Node) LogTail(max int) string {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return fmt.Sprintf("(%s: no log: %v)", n.name, err)
	}
	if len(b) > max {
		b = b[len(b)-max:]
		if i := strings.IndexByte(string(b), '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return fmt.Sprintf("--- %s log tail (%s):\n%s", n.name, n.logPath, b)
}
