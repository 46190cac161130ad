package h2grpc

// The receive side of HTTP/2 flow control (RFC 9113, 6.9): what a client may send, and
// when it gets its windows back. A client that sends past either window is in breach:
// past the connection's, GOAWAY FLOW_CONTROL_ERROR; past a stream's, that stream is
// reset FLOW_CONTROL_ERROR (as golang.org/x/net/http2's server does).
//
// Who gives window back, and when:
//   - A call of ours: its stream's window is what one request may take (it is never
//     given back: a unary request comes once), so its bytes are given back to the
//     connection as they are read. Holding them would let partial requests of many
//     streams (gRPC clients interleave them) fill the connection's window, none of
//     them whole: every call would wait for its stall timeout.
//   - an other call: both windows as its handler reads its body (or drops it
//     unread), so the connection's window bounds what Others' bodies hold
//     buffered, 1 MiB a connection, not MaxStreams times a stream's window.
//   - Padding, and data of streams already gone: the connection's window at once.

import (
	"encoding/binary"
	"fmt"
	"sync"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
)

// connWindow is the connection-level receive window a client gets; a stream's is what
// one request message may need (Config.MaxRecvMsgSize and gRPC's 5 bytes).
const connWindow = 1 << 20

// inflow is the connection's receive window. The reader takes from it; the reader and
// Others handlers (reading their bodies) give back to it.
type inflow struct {
	mu     sync.Mutex
	avail  int64 // what the client may still send: the window given, less what it sent
	unsent int64 // consumed, not yet given back
}

// take notes n bytes received; false when they were past the window.
func (f *inflow) take(n uint32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if int64(n) > f.avail {
		return false
	}
	f.avail -= int64(n)
	return true
}

// give notes n bytes consumed and returns the increment to send the client now (0: not
// yet; a quarter of the window at a time). It counts the increment as given before the
// caller sends it, so that the reader never sees the client use a window it has not
// counted.
func (f *inflow) give(n int) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unsent += int64(n)
	if f.unsent < connWindow/4 {
		return 0
	}
	inc := f.unsent
	f.unsent = 0
	f.avail += inc
	return uint32(inc)
}

// giveConn gives n consumed bytes back to the connection's window.
func (c *conn) giveConn(n int) {
	if inc := c.in.give(n); inc > 0 {
		c.w.control(http2.FrameWindowUpdate, 0, 0, binary.BigEndian.AppendUint32(nil, inc))
	}
}

// giveStream gives n bytes back to st's window (counted before it is sent, as give
// does) and to the connection's.
func (c *conn) giveStream(st *stream, n int) {
	st.inAvail.Add(int64(n))
	c.w.control(http2.FrameWindowUpdate, 0, st.id, binary.BigEndian.AppendUint32(nil, uint32(n)))
	c.giveConn(n)
}

// onData adds a DATA frame to its call's request.
func (c *conn) onData(f *http2.DataFrame) error {
	if !c.in.take(f.Length) {
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	st := c.stream(f.StreamID)
	if st == nil {
		if c.unopened(f.StreamID) {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		// A call already answered or reset: its rest is dropped, and the client told
		// the stream is closed (RFC 9113, 5.1), as golang.org/x/net/http2's server does;
		// unless the queue is full (a client that does not read): the reader never waits
		// for that, nor is a stream's rest in flight after our reset an error of its own.
		c.giveConn(int(f.Length))
		c.w.controlIfRoom(http2.FrameRSTStream, 0, f.StreamID, binary.BigEndian.AppendUint32(nil, uint32(http2.ErrCodeStreamClosed)))
		return nil
	}
	if st.ended.Load() {
		c.giveConn(int(f.Length))
		c.resetStream(st.id, http2.ErrCodeStreamClosed)
		return nil
	}
	if st.inAvail.Add(-int64(f.Length)) < 0 {
		c.giveConn(int(f.Length))
		c.resetStream(st.id, http2.ErrCodeFlowControl)
		return nil
	}
	if st.local() {
		c.giveConn(int(f.Length))
		if len(st.msg)+len(f.Data()) > 5+c.s.cfg.MaxRecvMsgSize {
			c.failStream(st, codes.ResourceExhausted, fmt.Sprintf("grpc: received message larger than max (%d vs. %d)", len(st.msg)+len(f.Data())-5, c.s.cfg.MaxRecvMsgSize))
			return nil
		}
		st.msg = append(st.msg, f.Data()...)
		// The prefix says the message's length: one over the cap is refused now, since
		// the stream's window (the cap) would never let the rest of it come.
		if len(st.msg) >= 5 {
			if n := binary.BigEndian.Uint32(st.msg[1:5]); int64(n) > int64(c.s.cfg.MaxRecvMsgSize) {
				c.failStream(st, codes.ResourceExhausted, fmt.Sprintf("grpc: received message larger than max (%d vs. %d)", n, c.s.cfg.MaxRecvMsgSize))
				return nil
			}
		}
	} else {
		if pad := int(f.Length) - len(f.Data()); pad > 0 && !f.StreamEnded() {
			c.giveStream(st, pad) // nobody reads padding
		} else if pad > 0 {
			c.giveConn(pad)
		}
		if !st.body.push(f.Data()) {
			c.giveConn(len(f.Data())) // its handler is done with it: dropped
		}
	}
	if f.StreamEnded() {
		c.endRequest(st)
	}
	return nil
}
