package loadgen

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"
)

// Proto says how replies are read.
type Proto int

const (
	RESP Proto = iota // Redis protocol, RESP2
	HTTP              // HTTP/1.1 keep-alive, Content-Length bodies
)

// Config shapes a run.
type Config struct {
	Addr string // host:port
	// Addrs, when set, spreads the connections over several servers: connection i goes
	// to Addrs[i % len(Addrs)], and Addr is not used.
	Addrs    []string
	Proto    Proto
	TLS      *tls.Config // when set, each connection is TLS, its handshake done before the run
	Conns    int         // connections (default 1)
	Pipeline int         // requests in flight per connection (default 1: unpipelined)
	Request  Request
	Keys     Keys
	// Replies is how many replies each request gets (default 1): a Request that
	// writes several commands for a key (a value, then its expiry) counts once.
	Replies int

	// A timed run sends for Warmup, then measures for Duration. A counted run
	// (Duration 0) sends until every connection's key stream ends (a Range) and
	// measures all of it.
	Warmup, Duration time.Duration
	// Window, when set, is called as the measured window of a timed run starts (true)
	// and ends (false): the caller reads the servers' CPU time there.
	Window func(start bool)
	// Timeout bounds the whole run (default: warmup + duration + 30 s, or 15 min for a
	// counted run): a server that stops answering fails the run instead of hanging it.
	Timeout time.Duration
}

// Result is what a run measured.
type Result struct {
	Ops        int64         // successful replies in the window
	Errors     int64         // error replies in the window (RESP errors, HTTP statuses other than 200)
	FirstError string        // the first error reply, for the report
	Elapsed    time.Duration // the window's length
	Latency    Hist          // every reply in the window, from its batch's write
	ClientCPU  time.Duration // this process's CPU time in the window
}

// Rate is successful operations per second.
func (r *Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// Run dials cfg.Conns connections, drives them and returns what the window measured.
// A connection that breaks fails the run. Cancelling ctx stops it early with ctx's error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	conns, err := dialAll(cfg)
	if err != nil {
		return nil, err
	}
	w := newWindow(cfg)
	stop := context.AfterFunc(ctx, func() { closeAll(conns) })
	defer stop()
	workers := make([]*worker, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		workers[i] = newWorker(cfg, w, c, i)
		wg.Add(1)
		go func() { defer wg.Done(); workers[i].run() }()
	}
	res := w.watch(&wg)
	closeAll(conns)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return res, merge(res, workers)
}

func (c Config) withDefaults() Config {
	c.Conns = max(c.Conns, 1)
	c.Pipeline = max(c.Pipeline, 1)
	c.Replies = max(c.Replies, 1)
	if c.Timeout <= 0 {
		c.Timeout = c.Warmup + c.Duration + 30*time.Second
		if c.Duration == 0 {
			c.Timeout = 15 * time.Minute
		}
	}
	return c
}

func dialAll(cfg Config) ([]net.Conn, error) {
	deadline := time.Now().Add(cfg.Timeout)
	var conns []net.Conn
	for i := range cfg.Conns {
		addr := cfg.Addr
		if len(cfg.Addrs) > 0 {
			addr = cfg.Addrs[i%len(cfg.Addrs)]
		}
		c, err := dial(cfg, addr)
		if err != nil {
			closeAll(conns)
			return nil, fmt.Errorf("loadgen: dial %s: %w", addr, err)
		}
		c.SetDeadline(deadline)
		conns = append(conns, c)
	}
	return conns, nil
}

// dial connects to addr, over TLS when cfg.TLS is set.
func dial(cfg Config, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if cfg.TLS == nil {
		return d.Dial("tcp", addr)
	}
	return tls.DialWithDialer(d, "tcp", addr, cfg.TLS)
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// merge adds the workers' tallies into res; the first broken connection is the error.
func merge(res *Result, workers []*worker) error {
	var broken error
	for _, w := range workers {
		res.Ops += w.ops
		res.Errors += w.errs
		res.Latency.Merge(&w.hist)
		if res.FirstError == "" {
			res.FirstError = w.firstErr
		}
		if broken == nil && w.broken != nil {
			broken = w.broken
		}
	}
	return broken
}

// window is the measured span of a run: fixed ahead for a timed run, the whole run for
// a counted one.
type window struct {
	cfg        Config
	counted    bool
	start, end time.Time
}

func newWindow(cfg Config) *window {
	w := &window{cfg: cfg, counted: cfg.Duration == 0}
	w.start = time.Now().Add(cfg.Warmup)
	w.end = w.start.Add(cfg.Duration)
	return w
}

// in reports whether a reply read at t counts, and done whether the run is over.
func (w *window) in(t time.Time) (in, done bool) {
	if w.counted {
		return true, false
	}
	return !t.Before(w.start) && t.Before(w.end), !t.Before(w.end)
}

// watch calls the Window hooks and reads this process's CPU time at the window's
// edges, waits for the workers and returns the window's length and CPU.
func (w *window) watch(wg *sync.WaitGroup) *Result {
	if w.counted {
		t0, cpu0 := time.Now(), selfCPU()
		wg.Wait()
		return &Result{Elapsed: time.Since(t0), ClientCPU: selfCPU() - cpu0}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	res := &Result{Elapsed: w.cfg.Duration}
	if !sleepUntil(w.start, done) {
		return res // every worker quit before the window: broken connections
	}
	w.hook(true)
	cpu0 := selfCPU()
	// The workers may all see the window's end and quit before this wakes: the end
	// hook is called either way, right at the end.
	sleepUntil(w.end, done)
	res.ClientCPU = selfCPU() - cpu0
	w.hook(false)
	<-done
	return res
}

func (w *window) hook(start bool) {
	if w.cfg.Window != nil {
		w.cfg.Window(start)
	}
}

// sleepUntil waits until t, false if done closes first.
func sleepUntil(t time.Time, done <-chan struct{}) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-done:
		return false
	}
}

// selfCPU is this process's user and system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// errBroken wraps what broke a connection.
var errBroken = errors.New("loadgen: connection broken")
