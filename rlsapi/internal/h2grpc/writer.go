package h2grpc

import (
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
)

// maxQueued bounds the bytes waiting to be written per connection: past it, whoever
// adds frames waits, and the reader stops reading a client that does not read.
const maxQueued = 1 << 20

// maxQueuedAnswers bounds them for an AsyncHandler's answers, which never wait: they
// come on goroutines that serve others too (in a node, a peer's reader). Past it the
// client is not reading, and its connection is closed.
const maxQueuedAnswers = 2 * maxQueued

// errStreamGone ends a response whose stream was reset or whose connection closed.
var errStreamGone = errors.New("h2grpc: stream reset or connection closed")

// writer queues a connection's frames and writes them from one goroutine, many at a
// time. It keeps the client's flow-control windows: DATA waits for room in both.
type writer struct {
	nc      net.Conn
	timeout time.Duration

	mu      sync.Mutex
	ready   sync.Cond // the loop waits for frames
	room    sync.Cond // producers wait for queue room or window
	buf     []byte    // frames to write
	spare   []byte    // the buffer being written, kept for reuse
	idle    bool      // the loop waits on ready
	err     error     // set once the connection failed or closed
	closing bool      // write what is queued, then close
	done    chan struct{}

	pending atomic.Int32 // calls whose handlers run

	// Writes on the reader (flush).
	raw          syscall.RawConn // the socket, to write without waiting; nil for TLS
	readerWrites bool            // the reader is between reads: it flushes before the next
	writing      bool            // the reader is writing what it took from buf
	loopWrites   atomic.Int64    // writes the loop made (tests)

	blocked   []*stream // answers the client's windows hold back (stream.held), in order
	heldBytes int       // their bytes
	finished  []*stream // held answers since gone out, or reset: their calls end (conn.forget)

	connWin  int64 // the client's connection window
	initWin  int64 // the client's SETTINGS_INITIAL_WINDOW_SIZE
	maxFrame int   // the client's SETTINGS_MAX_FRAME_SIZE
}

func newWriter(nc net.Conn, timeout time.Duration) *writer {
	w := &writer{nc: nc, timeout: timeout, connWin: 65535, initWin: 65535, maxFrame: 16384, done: make(chan struct{})}
	w.raw = socketOf(nc)
	w.ready.L, w.room.L = &w.mu, &w.mu
	return w
}

// loop writes queued frames until the connection fails or is closed.
func (w *writer) loop() {
	defer close(w.done)
	graceful := false
	defer func() {
		if !graceful {
			w.nc.Close()
			return
		}
		// All written: the client reads to the end of it (a GOAWAY saying why, often),
		// then sees the connection end; the reader drains what the client sends
		// meanwhile and closes it (conn.linger), within lingerTime.
		closeWrite(w.nc)
		w.nc.SetReadDeadline(time.Now().Add(lingerTime))
	}()
	for {
		w.mu.Lock()
		// Closing, answers still held back wait for the client's windows (a stop
		// that cannot wait longer aborts). While the reader writes (flush), the
		// frames after its must wait for it.
		for w.err == nil && (w.writing || len(w.buf) == 0 && (!w.closing || len(w.blocked) > 0)) {
			w.idle = true
			w.ready.Wait()
		}
		w.idle = false
		if w.pending.Load() > 0 && w.err == nil {
			// Calls are being answered: let them add their answers, so that one
			// write carries them all (a write costs a system call).
			w.mu.Unlock()
			runtime.Gosched()
			w.mu.Lock()
		}
		if w.err != nil || len(w.buf) == 0 {
			graceful = w.err == nil
			w.fail(errStreamGone)
			w.mu.Unlock()
			return
		}
		out := w.buf
		w.buf, w.spare = w.spare[:0], nil
		w.room.Broadcast()
		w.mu.Unlock()
		w.nc.SetWriteDeadline(time.Now().Add(w.timeout))
		_, err := w.nc.Write(out)
		w.loopWrites.Add(1)
		w.mu.Lock()
		if cap(out) <= maxQueued {
			w.spare = out[:0]
		}
		if err != nil {
			w.fail(err)
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
	}
}

// fail records err and wakes everyone waiting; w.mu is held.
func (w *writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
	w.ready.Broadcast()
	w.room.Broadcast()
}

// close writes what is queued, then closes the connection.
func (w *writer) close() {
	w.mu.Lock()
	w.closing = true
	w.readerWrites = false // the reader has stopped: it flushes no more
	w.ready.Broadcast()
	w.mu.Unlock()
}

// abort closes the connection without writing what is queued.
func (w *writer) abort(err error) {
	w.mu.Lock()
	w.fail(err)
	w.mu.Unlock()
	w.nc.Close()
}

// waitRoom waits until the queue has room; w.mu is held.
func (w *writer) waitRoom() error {
	for len(w.buf) > maxQueued && w.err == nil {
		w.room.Wait()
	}
	return w.err
}

// control queues a frame that flow control does not hold back.
func (w *writer) control(t http2.FrameType, flags http2.Flags, id uint32, p []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.waitRoom(); err != nil {
		return err
	}
	w.buf = appendFrame(w.buf, t, flags, id, p)
	w.queued()
	return nil
}

// controlIfRoom is control for a frame the peer may do without: queued only while the
// queue has room, it never holds the reader up.
func (w *writer) controlIfRoom(t http2.FrameType, flags http2.Flags, id uint32, p []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil && len(w.buf) <= maxQueued {
		w.buf = appendFrame(w.buf, t, flags, id, p)
		w.queued()
	}
}

// headers queues a header block, in one HEADERS frame and CONTINUATIONs as the client's
// frame size needs.
func (w *writer) headers(st *stream, block []byte, end bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.open(st); err != nil {
		return err
	}
	w.appendHeaders(st.id, block, end)
	if end {
		st.sentEnd = true
	}
	w.queued()
	return nil
}

func (w *writer) appendHeaders(id uint32, block []byte, end bool) {
	t, flags := http2.FrameHeaders, http2.Flags(0)
	if end {
		flags |= http2.FlagHeadersEndStream
	}
	for {
		n := min(len(block), w.maxFrame)
		f := flags
		if n == len(block) {
			f |= http2.FlagHeadersEndHeaders
		}
		w.buf = appendFrame(w.buf, t, f, id, block[:n])
		block = block[n:]
		if len(block) == 0 {
			return
		}
		t, flags = http2.FrameContinuation, 0
	}
}

// open is nil while st may still be answered, once the queue has room; w.mu is held.
func (w *writer) open(st *stream) error {
	if err := w.waitRoom(); err != nil {
		return err
	}
	return w.answerable(st)
}

// openNow is open without waiting: past maxQueuedAnswers the client is not reading,
// and the connection is closed; w.mu is held.
func (w *writer) openNow(st *stream) error {
	if w.err == nil && len(w.buf) > maxQueuedAnswers {
		w.fail(errNotReading)
		w.nc.Close() // the loop may be blocked in a write to it
	}
	if w.err != nil {
		return w.err
	}
	return w.answerable(st)
}

func (w *writer) answerable(st *stream) error {
	if st.reset || st.sentEnd {
		return errStreamGone
	}
	return nil
}

// errNotReading ends a connection whose client left more than maxQueuedAnswers unread.
var errNotReading = errors.New("h2grpc: the client does not read its answers")

// refusal queues a call's whole answer in one header block (a trailers-only answer),
// waiting for queue room unless now; it reports whether it did.
func (w *writer) refusal(st *stream, block []byte, now bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	open := w.open
	if now {
		open = w.openNow
	}
	if open(st) != nil {
		return false
	}
	w.appendHeaders(st.id, block, true)
	st.sentEnd = true
	w.queued()
	return true
}

// data queues p on st as DATA frames, each when both windows have room for it.
func (w *writer) data(st *stream, p []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(p) > 0 {
		if err := w.open(st); err != nil {
			return err
		}
		n := min(len(p), w.maxFrame) // a frame at a time: open waits for queue room
		rest := w.appendData(st, p[:n])
		if len(rest) == n {
			w.room.Wait() // no window
			continue
		}
		p = p[n-len(rest):]
		w.queued()
	}
	return nil
}

// reply queues a whole answer of a unary call: headers, msg (the gRPC-framed message),
// trailers. With hold it never waits, neither for queue room (openNow) nor for the
// client's flow-control windows: an AsyncHandler's answer may come on the connection's
// reader, which must stay free to read the WINDOW_UPDATE that opens them, or on a
// goroutine that serves others too. What the windows hold back then waits here,
// a copy, with its trailers (writer.blocked); past maxQueued of it the client is not
// taking its answers, and the connection is closed. Without hold (a UnaryHandler's answer)
// it waits for the windows, as an other call's body does.
//
// A held answer's call stays open (counted against MaxStreams, its WINDOW_UPDATEs
// applied) until it has gone out: held reports that the writer ends it then (finished).
func (w *writer) reply(st *stream, msg []byte, hold bool) (held bool) {
	w.mu.Lock()
	open := w.openNow
	if !hold {
		open = w.open
	}
	if open(st) != nil {
		w.mu.Unlock()
		return false
	}
	if hold || int64(len(msg)) <= min(w.connWin, w.initWin+st.sendDelta) {
		defer w.mu.Unlock()
		w.appendHeaders(st.id, okHeaders, false)
		return w.finish(st, w.appendData(st, msg))
	}
	w.mu.Unlock()
	if w.headers(st, okHeaders, false) == nil && w.data(st, msg) == nil {
		w.headers(st, okTrailers, true)
	}
	return false
}

// finish ends st's answer after its DATA was queued but rest, which it holds back for
// the windows, and reports whether it did; w.mu is held.
func (w *writer) finish(st *stream, rest []byte) (held bool) {
	defer w.queued()
	if len(rest) == 0 {
		w.appendHeaders(st.id, okTrailers, true)
		st.sentEnd = true
		return false
	}
	if w.heldBytes+len(rest) > maxQueued {
		w.fail(errHeldTooMuch)
		return false
	}
	st.held = append([]byte(nil), rest...)
	w.heldBytes += len(rest)
	w.blocked = append(w.blocked, st)
	return true
}

// errHeldTooMuch ends a connection whose client holds back more answers than maxQueued
// with its flow-control windows.
var errHeldTooMuch = errors.New("h2grpc: the client's flow-control windows hold back too many answers")

// appendData queues as much of p on st as both windows allow, in frames of the client's
// size, and returns the rest; w.mu is held.
func (w *writer) appendData(st *stream, p []byte) []byte {
	for len(p) > 0 {
		win := min(w.connWin, w.initWin+st.sendDelta)
		if win <= 0 {
			break
		}
		n := int(min(int64(len(p)), win, int64(w.maxFrame)))
		w.buf = appendFrame(w.buf, http2.FrameData, 0, st.id, p[:n])
		w.connWin -= int64(n)
		st.sendDelta -= int64(n)
		p = p[n:]
	}
	return p
}

// release queues what the windows now let through of the answers held back, in the
// order they came, each with its trailers once all of it went; w.mu is held.
func (w *writer) release() {
	kept := w.blocked[:0]
	for _, st := range w.blocked {
		if st.reset {
			w.heldBytes -= len(st.held)
			st.held = nil
			w.finished = append(w.finished, st)
			continue
		}
		rest := w.appendData(st, st.held)
		w.heldBytes -= len(st.held) - len(rest)
		st.held = rest
		if len(rest) > 0 {
			kept = append(kept, st)
			continue
		}
		w.appendHeaders(st.id, okTrailers, true)
		st.sentEnd = true
		w.finished = append(w.finished, st)
	}
	clear(w.blocked[len(kept):])
	w.blocked = kept
	w.queued()
}

// takeFinished returns the streams whose held answers ended since it was last called;
// w.mu is held.
func (w *writer) takeFinished() []*stream {
	f := w.finished
	w.finished = nil
	return f
}

// maxWindow is the largest flow-control window HTTP/2 allows (RFC 9113, 6.9.1).
const maxWindow = 1<<31 - 1

// windowUpdate adds n to the connection's window (st nil) or st's. It returns the held
// answers that ended (writer.finished), and overflow when the window would pass
// maxWindow: then it is left as it was, and the caller answers FLOW_CONTROL_ERROR.
func (w *writer) windowUpdate(st *stream, n uint32) (ended []*stream, overflow bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st == nil {
		if w.connWin+int64(n) > maxWindow {
			return nil, true
		}
		w.connWin += int64(n)
	} else {
		if w.initWin+st.sendDelta+int64(n) > maxWindow {
			return nil, true
		}
		st.sendDelta += int64(n)
	}
	w.release()
	w.room.Broadcast()
	return w.takeFinished(), false
}

// settings applies the client's settings that writing depends on, and returns the held
// answers that ended.
func (w *writer) settings(f *http2.SettingsFrame) []*stream {
	w.mu.Lock()
	defer w.mu.Unlock()
	if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
		w.initWin = int64(v)
	}
	if v, ok := f.Value(http2.SettingMaxFrameSize); ok {
		w.maxFrame = int(v)
	}
	w.release()
	w.room.Broadcast()
	return w.takeFinished()
}

// resetStream marks st reset: nothing more is sent on it. It returns the held answers
// that ended, st's among them if it was held.
func (w *writer) resetStream(st *stream) []*stream {
	w.mu.Lock()
	defer w.mu.Unlock()
	st.reset = true
	w.release()
	w.room.Broadcast()
	return w.takeFinished()
}
