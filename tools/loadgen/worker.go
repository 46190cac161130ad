package loadgen

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// worker drives one connection: it writes a batch of Pipeline requests, reads their
// replies, and repeats until its window ends or its keys run out.
type worker struct {
	conn  net.Conn
	win   *window
	req   Request
	read  func(*reader) error
	keys  KeyStream
	depth int
	each  int // replies per request
	rd    *reader
	wbuf  []byte
	kbuf  []byte
	seq   uint64

	ops, errs int64
	firstErr  string
	hist      Hist
	broken    error
}

func newWorker(cfg Config, win *window, c net.Conn, i int) *worker {
	read := readRESP
	if cfg.Proto == HTTP {
		read = readHTTP
	}
	return &worker{
		conn: c, win: win, req: cfg.Request, read: read, depth: cfg.Pipeline, each: cfg.Replies,
		keys: cfg.Keys.Stream(i, cfg.Conns),
		rd:   newReader(c, 64<<10),
		wbuf: make([]byte, 0, 256*cfg.Pipeline),
		kbuf: make([]byte, 0, 64),
		// Sequence numbers of different connections never meet: unique members.
		seq: uint64(i) << 40,
	}
}

func (w *worker) run() {
	for {
		sent := time.Now()
		n := w.fill(sent.UnixMilli())
		if n == 0 {
			return // the keys ran out
		}
		if _, err := w.conn.Write(w.wbuf); err != nil {
			w.fail(err)
			return
		}
		if done := w.replies(n, sent); done {
			return
		}
	}
}

// fill builds the next batch in wbuf and returns how many requests it holds.
func (w *worker) fill(now int64) int {
	w.wbuf = w.wbuf[:0]
	n := 0
	for ; n < w.depth; n++ {
		key, ok := w.keys.Next(w.kbuf)
		if !ok {
			break
		}
		w.kbuf = key
		w.seq++
		w.wbuf = w.req(w.wbuf, key, now, w.seq)
	}
	return n
}

// replies reads the replies of n requests, tallying those inside the window; done once
// the window (or the connection) has ended.
func (w *worker) replies(n int, sent time.Time) (done bool) {
	var t time.Time
	for range n {
		var failed *errReply
		for range w.each {
			err := w.read(w.rd)
			var er *errReply
			if err != nil && !errors.As(err, &er) {
				w.fail(err)
				return true
			}
			failed = cmpReply(failed, er)
		}
		t = time.Now()
		if in, _ := w.win.in(t); in {
			w.tally(failed, t.Sub(sent))
		}
	}
	_, done = w.win.in(t)
	return done
}

// tally counts one request in the window: an error reply, or an operation and its
// latency.
func (w *worker) tally(failed *errReply, latency time.Duration) {
	if failed != nil {
		w.errs++
		if w.firstErr == "" {
			w.firstErr = failed.msg
		}
		return
	}
	w.ops++
	w.hist.Record(latency)
}

func cmpReply(a, b *errReply) *errReply {
	if a != nil {
		return a
	}
	return b
}

func (w *worker) fail(err error) {
	w.broken = fmt.Errorf("%w: %s: %v", errBroken, w.conn.RemoteAddr(), err)
}
