package benchharness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/procstat"
)

// procs starts the server processes of a run and stops every one of them however the
// run ends: Stop on return, and each child gets SIGKILL should this process die first
// (Pdeathsig), so a killed harness leaves nothing listening.
type procs struct {
	dir string // logs and redis working directories

	mu   sync.Mutex
	list []*proc
}

// proc is one server process.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed once the process has exited and been reaped
}

// Pid is the process id (of the server itself: taskset execs it).
func (p *proc) Pid() int { return p.cmd.Process.Pid }

// CPU is the process's CPU time so far, user and system, all threads.
func (p *proc) CPU() time.Duration {
	d, _ := procstat.CPUTime(p.Pid())
	return d
}

// RSS is the process's resident memory, in bytes.
func (p *proc) RSS() int64 {
	r, _ := procstat.RSS(p.Pid())
	return r
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// start runs bin with args, its output to <dir>/<name>.log. cpus, when set, pins it
// (every thread) to those CPUs with taskset; env adds to the environment.
func (ps *procs) start(name, cpus string, env []string, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(ps.dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if cpus != "" {
		args = append([]string{"-c", cpus, bin}, args...)
		bin = "taskset"
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	ps.mu.Lock()
	ps.list = append(ps.list, p)
	ps.mu.Unlock()
	return p, nil
}

// stop ends p: SIGTERM, then SIGKILL if it has not exited after grace.
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// stopAll stops every process still running, all at once.
func (ps *procs) stopAll() {
	ps.mu.Lock()
	list := ps.list
	ps.mu.Unlock()
	ps.stopSome(list...)
}

// stopSome stops the given processes, all at once, and forgets them.
func (ps *procs) stopSome(some ...*proc) {
	ps.mu.Lock()
	ps.list = slices.DeleteFunc(ps.list, func(p *proc) bool { return slices.Contains(some, p) })
	ps.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range some {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(3 * time.Second) }()
	}
	wg.Wait()
}

// logTail is the end of p's log, for an error message.
func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
