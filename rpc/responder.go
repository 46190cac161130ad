package rpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/leapcount/leapcount/internal/wire"
)

// responder writes whole response frames to a connection. The reader writes the
// answers it decides itself: it is the connection's own goroutine, and a peer that does
// not read holds up only its own connection. An answer completed elsewhere (a lease's
// wake, a load: goroutines that serve every connection) is only queued, and written by
// whoever writes next or by the connection's flusher, so that no completion waits on a
// peer's socket. A peer that leaves more than maxQueuedAnswers unread loses the
// connection.
type responder struct {
	c       net.Conn
	timeout time.Duration
	wake    chan struct{} // the flusher has answers to write (one slot: a wake is enough)

	mu      sync.Mutex
	buf     []byte // answers not yet written
	spare   []byte // the buffer last written, kept for reuse
	writing bool   // someone writes: who queues leaves it to them
	err     error  // set once a write failed or the bound was passed
}

// maxQueuedAnswers bounds the answers waiting to be written to one peer.
const maxQueuedAnswers = 4 << 20

// errNotReading ends a connection whose peer left more than maxQueuedAnswers unread.
var errNotReading = errors.New("rpc: the peer does not read its answers")

func newResponder(c net.Conn, timeout time.Duration) *responder {
	return &responder{c: c, timeout: timeout, wake: make(chan struct{}, 1)}
}

// send queues frame and, with flush, writes what is queued: the reader's way.
func (w *responder) send(frame []byte, flush bool) error {
	w.mu.Lock()
	if err := w.add(frame); err != nil || !flush || w.writing {
		w.mu.Unlock()
		return err
	}
	w.writing = true
	return w.writeQueued()
}

// queue queues frame without waiting, for the flusher to write: a completion's way.
func (w *responder) queue(frame []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.add(frame) != nil || w.writing {
		return
	}
	w.writing = true
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// add appends frame to the queue, or fails the connection past the bound; w.mu is held.
func (w *responder) add(frame []byte) error {
	if w.err == nil && len(w.buf)+len(frame) > maxQueuedAnswers {
		w.err = errNotReading
		w.c.Close() // a write in progress may be blocked on it
	}
	if w.err != nil {
		return w.err
	}
	w.buf = append(w.buf, frame...)
	return nil
}

// writeQueued writes until the queue is empty, then lets the next writer in; w.mu is
// held on entry, released on return.
func (w *responder) writeQueued() error {
	for len(w.buf) > 0 && w.err == nil {
		out := w.buf
		w.buf, w.spare = w.spare[:0], nil
		w.mu.Unlock()
		w.c.SetWriteDeadline(time.Now().Add(w.timeout))
		_, err := w.c.Write(out)
		w.mu.Lock()
		if cap(out) <= 1<<20 { // keep no megabytes per connection
			w.spare = out[:0]
		}
		if err != nil && w.err == nil {
			w.err = err
			w.c.Close()
		}
	}
	w.writing = false
	err := w.err
	w.mu.Unlock()
	return err
}

// flush writes what completions queued, until stop is closed.
func (w *responder) flush(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-w.wake:
			w.mu.Lock()
			w.writeQueued()
		}
	}
}

// answerMessage answers a message frame (its kind has a handler: messageHandler) and
// returns the answer frame.
func (s *Server[O, R]) answerMessage(ctx context.Context, frame []byte) ([]byte, error) {
	d := wire.NewDecoder(frame[1:])
	id := d.Uvarint("id")
	if err := d.Err(); err != nil {
		return nil, err
	}
	out := appendHeader(nil, frame[0]+1, id)
	out, err := s.messages[frame[0]].Answer(ctx, d.Rest(), out)
	if err != nil {
		return nil, err
	}
	finishFrame(out, 0)
	return out, nil
}

func (s *Server[O, R]) decodeRequestFrame(d *wire.Decoder, frame []byte, req *Request[O]) (uint64, error) {
	*d = wire.NewDecoder(frame)
	if typ := d.Byte("type"); typ != frameRequest && d.Err() == nil {
		return 0, fmt.Errorf("%w: type %d, want a request", ErrBadFrame, typ)
	}
	id := d.Uvarint("id")
	readRequest(d, s.codec, req)
	return id, d.End()
}

func (s *Server[O, R]) appendResponse(b []byte, id uint64, results []R) []byte {
	b = appendHeader(b, frameResponse, id)
	b = binary.AppendUvarint(b, uint64(len(results)))
	for i := range results {
		b = s.codec.AppendResult(b, &results[i])
	}
	finishFrame(b, 0)
	return b
}

// handle decides req, read at read, unless its time is up. The handler gets the time
// left as its context's deadline, and must not decide ops once it has passed (it may
// wait, for instance for a handoff): the sender has given up on them by then.
func (s *Server[O, R]) handle(ctx context.Context, read time.Time, req *Request[O], results []R) {
	left := s.timeLeft(read, req)
	if left <= 0 {
		s.expired(results)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	s.h.Handle(ctx, req, results)
}

// timeLeft is how long req, read at read, may still be decided: its budget, less the
// time since, both spans on this node's monotonic clock.
func (s *Server[O, R]) timeLeft(read time.Time, req *Request[O]) time.Duration {
	return req.Budget - s.now().Sub(read)
}

// expired answers a request whose time ran out before it was decided: not decided.
func (s *Server[O, R]) expired(results []R) {
	for i := range results {
		results[i] = s.codec.Expired()
	}
}
