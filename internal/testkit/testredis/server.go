package testredis

import (
	"errors"
	"fmt"
	"github.com/leapcount/leapcount/internal/testkit/freeport"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// StartTimeout bounds how long Start and Restart wait for the server to answer PING.
const StartTimeout = 15 * time.Second

// Server is one redis-server process owned by a test.
type Server struct {
	tb   testing.TB
	bin  string
	dir  string
	port int
	args func(port int) []string // the command line after the binary

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start starts a redis-server on a free 127.0.0.1 port, with persistence off, in a
// temporary directory, and stops it when the test ends. extra are more command-line
// options (for example "--cluster-enabled", "yes"). It fails the test if redis-server is
// not installed or does not answer PING within StartTimeout.
func Start(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	return start(tb, func(s *Server, port int) []string {
		return append(s.commonArgs(port), append([]string{"--save", "", "--appendonly", "no"}, extra...)...)
	})
}

// start makes the server and starts it, trying another port if the chosen one was
// taken in between (it is free when chosen, but another process may bind it first).
func start(tb testing.TB, argv func(s *Server, port int) []string) *Server {
	tb.Helper()
	s := &Server{tb: tb, bin: binary(tb), dir: tb.TempDir()}
	s.args = func(port int) []string { return argv(s, port) }
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if s.port, err = freeport.TCP(); err != nil {
			continue
		}
		if err = s.launch(); err == nil {
			tb.Cleanup(s.Stop)
			return s
		}
	}
	tb.Fatalf("testredis: cannot start redis-server: %v", err)
	return nil
}

func (s *Server) commonArgs(port int) []string {
	return []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--daemonize", "no", "--protected-mode", "no",
		"--logfile", filepath.Join(s.dir, "redis.log"),
	}
}

// binary finds redis-server, failing the test with the fix when it is missing.
func binary(tb testing.TB) string {
	tb.Helper()
	p, ok := findBinary("/usr/bin/redis-server", "redis-server")
	if !ok {
		tb.Fatal(MissingMessage)
	}
	return p
}

// MissingMessage is how Start fails when redis-server is not installed.
const MissingMessage = "testredis: redis-server is not installed; run scripts/ensure-redis.sh " +
	"(make test does) to install it"

// findBinary returns the first of path (an absolute file) or name (looked up on PATH)
// that exists.
func findBinary(path, name string) (string, bool) {
	if _, err := os.Stat(path); err == nil {
		return path, true
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	return "", false
}

// launch starts the process on s.port and waits until it answers PING.
func (s *Server) launch() error {
	cmd := exec.Command(s.bin, s.args(s.port)...)
	cmd.Dir = s.dir
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	if err := s.awaitPing(done); err != nil {
		s.Stop()
		return fmt.Errorf("%w\n%s", err, s.logTail())
	}
	return nil
}

// awaitPing polls PING until it answers, the process exits, or StartTimeout passes.
func (s *Server) awaitPing(exited <-chan struct{}) error {
	deadline := time.Now().Add(StartTimeout)
	wait := time.Millisecond
	for {
		err := ping(s.Addr(), 200*time.Millisecond)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on port %d exited at start", s.port)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on port %d did not answer PING within %v: %v", s.port, StartTimeout, err)
		}
		time.Sleep(wait) // the polling interval, not a stand-in for the condition
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// ping sends one PING on a fresh connection and wants +PONG.
func ping(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", buf[:n])
	}
	return nil
}

func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return "redis.log:\n" + string(b)
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the server's TCP port; it stays the same across Restart.
func (s *Server) Port() int { return s.port }

// URL is redis://127.0.0.1:port/0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Dir is the server's working directory.
func (s *Server) Dir() string { return s.dir }

// Stop kills the server (as a crash would) and waits for it to exit. Stopping a stopped
// server does nothing. Its data is gone: persistence is off.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL) // also ends a paused (SIGSTOPped) process
	select {
	case <-done:
	case <-time.After(StartTimeout):
		s.tb.Errorf("testredis: redis-server pid %d did not exit after SIGKILL", cmd.Process.Pid)
	}
}

// Restart stops the server if it runs and starts a new, empty one on the same port.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	if err := s.launch(); err != nil {
		s.tb.Fatalf("testredis: restart on port %d: %v", s.port, err)
	}
}

// Pause freezes the server (SIGSTOP): connections still open, but nothing answers, as
// with a hung or overloaded Redis. Resume undoes it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume lets a paused server run again.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.tb.Fatalf("testredis: %v on a stopped server", sig)
	}
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		s.tb.Fatalf("testredis: %v: %v", sig, err)
	}
}
