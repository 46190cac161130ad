package respapi

import (
	"bytes"
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The event loops serve the connections that are sockets: one loop per P, each
// polling its connections with epoll (poller) and serving, on its own goroutine,
// whatever arrived. A pipeline is read in one read and answered in one write, and no
// goroutine is woken per request: the goroutine per connection that redcon ran cost
// most of a request's CPU in the scheduler and in reads and writes (make bench: see
// BENCHMARKS.md).
//
// A loop must never wait, or every connection on it waits. A batch goes to the
// Decider, which decides it at once when it can (the common case: keys this node owns,
// in memory); a batch decided later (forwarded to another node, loaded from Redis,
// waiting for a lease) parks its session until it is, and its Done brings the session
// back to the loop (startBatch). A command that itself may wait (EXEC) parks the
// session on a goroutine of its own until what it had received is served (park).
// Bytes that arrive meanwhile wait in the loop, bounded by MaxUnanswered.
type loops struct {
	s       *Server
	pollers []*poller
	next    atomic.Uint32 // round robin over pollers

	clock atomic.Int64 // the sweeper's time, unix nanoseconds: what lastRead is stamped with
	quit  chan struct{}
	swept sync.WaitGroup
}

// loopConn is a connection served by a loop. Its fields without a note are the loop's
// own; the atomic ones are read by the sweeper.
type loopConn struct {
	p  *poller
	fd int
	ss *session
	nc net.Conn // as accepted: closed at the end, to give its MaxClients place back

	out    []byte // replies the socket has not taken yet
	later  []byte // bytes received while parked
	closed bool

	lastRead atomic.Int64 // when input last arrived (loops.clock)
	outSince atomic.Int64 // since when replies have waited for the client to read them (0: none)
	parked   atomic.Bool  // the session is serving on a goroutine (its own until it is back), or waits for a batch
	deciding bool         // a batch of the session is with the Decider (startBatch), to be decided later
	dropped  atomic.Bool  // the sweeper closed it (counted once)
}

// startLoops starts the event loops and the sweeper, once. s.mu is held.
func (s *Server) startLoops() (*loops, error) {
	if s.loops != nil {
		return s.loops, nil
	}
	l := &loops{s: s, quit: make(chan struct{})}
	l.clock.Store(time.Now().UnixNano())
	for range runtime.GOMAXPROCS(0) {
		p, err := newPoller(l)
		if err != nil {
			l.stopPollers()
			return nil, err
		}
		l.pollers = append(l.pollers, p)
	}
	l.swept.Add(1)
	go l.sweep()
	s.loops = l
	return l, nil
}

// enroll hands the socket under nc to a loop: a duplicate of its descriptor, nc's own
// closed. nc itself stays open (for its MaxClients place) until the loop closes it.
func (l *loops) enroll(nc net.Conn, raw syscall.Conn, ss *session) error {
	fd, err := dupSocket(raw)
	if err != nil {
		return err
	}
	raw.(net.Conn).Close()
	p := l.pollers[l.next.Add(1)%uint32(len(l.pollers))]
	lc := &loopConn{p: p, fd: fd, ss: ss, nc: nc}
	lc.lastRead.Store(l.clock.Load())
	p.post(func() { lc.open() })
	return nil
}

func (l *loops) stop() {
	close(l.quit)
	l.swept.Wait()
	l.stopPollers()
}

func (l *loops) stopPollers() {
	for _, p := range l.pollers {
		p.stop()
	}
}

// open starts serving lc (on its loop).
func (lc *loopConn) open() {
	s := lc.ss.s
	s.mu.Lock()
	lc.ss.loop, lc.ss.c.loop = lc, lc
	lc.ss.c.batch.call.Done = lc.batchDecided
	closed := s.closed
	s.mu.Unlock()
	if err := lc.p.add(lc); err != nil || closed {
		lc.closed = true
		closeFD(lc.fd)
		s.closedConn(lc.ss, lc.nc)
	}
}

// traffic takes bytes the client sent (on the loop).
func (lc *loopConn) traffic(p []byte) {
	lc.lastRead.Store(lc.p.l.clock.Load())
	if lc.parked.Load() {
		if int64(len(lc.later)+len(p)) > lc.ss.s.conn.max {
			lc.ss.s.metrics.dropped[dropProtocol].Inc() // sent on and on while its batch waits
			lc.closeNow(errTooLarge)
			return
		}
		lc.later = append(lc.later, p...)
		return
	}
	lc.serve(p)
}

// serve serves p and writes the replies (on the loop).
func (lc *loopConn) serve(p []byte) {
	ok := lc.ss.receive(p)
	if !lc.write(lc.ss.c.out.take()) {
		return
	}
	switch {
	case !ok:
		lc.wait()
	case lc.ss.closing():
		lc.closeNow(nil)
	}
}

// wait parks the session until what it waits for is done: a batch the Decider decides
// later (startBatch parked it already), or anything else (EXEC) on a goroutine of its
// own.
func (lc *loopConn) wait() {
	if !lc.deciding {
		lc.park()
	}
}

// startBatch hands the session's batch to the Decider and reports whether it was
// decided at once. Otherwise the session stays parked until batchDecided.
func (lc *loopConn) startBatch() bool {
	s, b := lc.ss.s, &lc.ss.c.batch
	b.call.Ops, b.call.Results = b.ops, b.results
	was := lc.parked.Swap(true)
	s.parked.Add(1) // before Decide: its Done may come first, from another goroutine
	if s.cfg.Decider.Decide(s.ctx, &b.call) {
		s.parked.Done()
		lc.parked.Store(was)
		return true
	}
	lc.deciding = true
	return false
}

// batchDecided is the Done of the session's batch: the batch is decided, and the
// session goes on on the loop (decided).
func (lc *loopConn) batchDecided() {
	lc.p.post(lc.decided)
	lc.ss.s.parked.Done()
}

// decided is the batch the session waited for decided, back on the loop: it writes the
// replies, and serves what was held and then what arrived meanwhile.
func (lc *loopConn) decided() {
	lc.deciding = false
	if lc.closed {
		return
	}
	ok := lc.ss.decided()
	if !lc.write(lc.ss.c.out.take()) {
		return
	}
	if !ok {
		lc.wait()
		return
	}
	lc.resume()
}

// maxUnwritten bounds the replies a connection holds that its socket did not take:
// past it, the client is not reading, and is dropped (as Redis's client output buffer
// limit does).
const maxUnwritten = 16 << 20

var errUnread = errors.New("the client left too many replies unread")

// write writes b, or buffers (copies) what the socket does not take now; false if the
// connection is gone.
func (lc *loopConn) write(b []byte) bool {
	if len(b) == 0 || lc.closed {
		return !lc.closed
	}
	if len(lc.out) > 0 {
		if len(lc.out)+len(b) > maxUnwritten {
			// The client sends and does not read: it would hold the replies in this
			// node's memory, and the loop's CPU, for as long as it sends.
			lc.ss.s.metrics.dropped[dropUnread].Inc()
			lc.closeNow(errUnread)
			return false
		}
		lc.out = append(lc.out, b...)
		return true
	}
	n, err := writeFD(lc.fd, b)
	if err != nil {
		lc.closeNow(err)
		return false
	}
	if n < len(b) {
		lc.out = append(lc.out, b[n:]...)
		lc.outSince.Store(time.Now().UnixNano())
		if err := lc.p.watchWrites(lc, true); err != nil {
			lc.closeNow(err)
			return false
		}
	}
	return true
}

// flush writes what was buffered, once the socket has room; false if the connection
// is gone.
func (lc *loopConn) flush() bool {
	n, err := writeFD(lc.fd, lc.out)
	if err != nil {
		lc.closeNow(err)
		return false
	}
	lc.out = lc.out[n:]
	if len(lc.out) > 0 {
		return true
	}
	lc.out = nil
	lc.outSince.Store(0)
	if err := lc.p.watchWrites(lc, false); err != nil {
		lc.closeNow(err)
		return false
	}
	return true
}

// park goes on serving the session on a goroutine, and back on the loop when done.
func (lc *loopConn) park() {
	lc.parked.Store(true)
	s := lc.ss.s
	s.parked.Add(1)
	go func() {
		defer s.parked.Done()
		lc.ss.serveParked()
		out := bytes.Clone(lc.ss.c.out.take())
		lc.p.post(func() { lc.unpark(out) })
	}()
}

// unpark is the session back on the loop: it writes what was answered meanwhile and
// serves what arrived meanwhile.
func (lc *loopConn) unpark(out []byte) {
	if lc.closed || !lc.write(out) {
		return
	}
	lc.resume()
}

// resume serves, on the loop again, what arrived while the session was parked.
func (lc *loopConn) resume() {
	if lc.ss.closing() {
		lc.closeNow(nil)
		return
	}
	lc.parked.Store(false)
	p := lc.later
	lc.later = nil
	lc.serve(p)
}

// Close closes the connection from any goroutine.
func (lc *loopConn) Close() { lc.p.post(func() { lc.closeNow(nil) }) }

// closeNow closes the connection (on the loop), writing first what the socket takes
// of the replies buffered.
func (lc *loopConn) closeNow(err error) {
	if lc.closed {
		return
	}
	lc.closed = true
	if len(lc.out) > 0 {
		writeFD(lc.fd, lc.out)
		lc.out = nil
	}
	if err != nil && err != errEOF {
		lc.ss.s.log.Debug("resp connection ended", "remote", lc.ss.c.remote, "err", err)
	}
	lc.p.remove(lc)
	lc.ss.s.closedConn(lc.ss, lc.nc)
}

// sweep closes, every tick, the connections whose time is up: silent for IdleTimeout,
// not authenticated within AuthTimeout, or not reading their replies for WriteTimeout.
func (l *loops) sweep() {
	defer l.swept.Done()
	cc := l.s.conn
	tick := cc.write
	for _, d := range []time.Duration{cc.idle, cc.auth} {
		if d > 0 {
			tick = min(tick, d)
		}
	}
	t := time.NewTicker(min(max(tick/8, 5*time.Millisecond), time.Second))
	defer t.Stop()
	for {
		select {
		case <-l.quit:
			return
		case now := <-t.C:
			l.clock.Store(now.UnixNano())
			l.sweepOnce(now.UnixNano())
		}
	}
}

func (l *loops) sweepOnce(now int64) {
	cc := l.s.conn
	type drop struct {
		lc     *loopConn
		reason string
	}
	var drops []drop
	l.s.mu.Lock()
	for ss := range l.s.open {
		lc := ss.loop
		if lc == nil || lc.parked.Load() {
			continue // a parked session waits for the server, not for its client
		}
		switch by := ss.c.authBy.Load(); {
		case by != 0 && now > by:
			drops = append(drops, drop{lc, dropNoAuth})
		case cc.idle > 0 && now-lc.lastRead.Load() > int64(cc.idle):
			drops = append(drops, drop{lc, dropIdle})
		case lc.outSince.Load() != 0 && now-lc.outSince.Load() > int64(cc.write):
			drops = append(drops, drop{lc, dropWrite})
		}
	}
	l.s.mu.Unlock()
	for _, d := range drops { // not under s.mu: closing a connection takes it
		d.lc.drop(d.reason)
	}
}

// drop closes the connection for reason, counted once.
func (lc *loopConn) drop(reason string) {
	if lc.dropped.CompareAndSwap(false, true) {
		lc.ss.s.metrics.dropped[reason].Inc()
		lc.Close()
	}
}
