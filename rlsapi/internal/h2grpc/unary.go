package h2grpc

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// outBufs keep answer buffers between calls.
var outBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// runUnary runs a unary call's handler and answers it.
func (c *conn) runUnary(ctx context.Context, st *stream) {
	bp := outBufs.Get().(*[]byte)
	call := Call{Method: st.method, Authorization: st.auth, Remote: c.nc.RemoteAddr(), Message: st.msg[5:]}
	out, err := c.handle(ctx, st, &call, append((*bp)[:0], 0, 0, 0, 0, 0))
	c.answer(st, bp, out, err, false)
}

// runAsync runs an AsyncHandler on the reader; the call is answered when it replies.
func (c *conn) runAsync(ctx context.Context, st *stream) {
	a := &st.reply
	a.c, a.st, a.bp = c, st, outBufs.Get().(*[]byte)
	a.call = Call{Method: st.method, Authorization: st.auth, Remote: c.nc.RemoteAddr(), Message: st.msg[5:],
		Out: append((*a.bp)[:0], 0, 0, 0, 0, 0)}
	reply := a.reply // one allocation: the call, its flag and its buffer live in st
	defer func() {
		if p := recover(); p != nil {
			c.s.cfg.Logger.Error("grpc: handler panicked", "method", st.method, "panic", p)
			reply(nil, status.Error(codes.Internal, fmt.Sprintf("handler panicked: %v", p)))
		}
	}()
	st.async(ctx, &a.call, reply)
}

// asyncReply is an async call's answer on its way: what its handler's reply needs.
type asyncReply struct {
	c       *conn
	st      *stream
	bp      *[]byte
	call    Call
	replied atomic.Bool
}

// reply answers the call; a handler that replies twice: the first answer stands.
func (a *asyncReply) reply(out []byte, err error) {
	if !a.replied.CompareAndSwap(false, true) {
		return
	}
	if err == nil && len(out) < 5 {
		err = status.Error(codes.Internal, "handler answered without the 5 bytes of Call.Out")
	}
	a.c.answer(a.st, a.bp, out, err, true)
	a.c.s.handlers.Done()
}

// answer answers st with out (its handler's answer, in *bp's memory) or err, and ends
// the call; hold is writer.reply's.
func (c *conn) answer(st *stream, bp *[]byte, out []byte, err error, hold bool) {
	held := false
	if err != nil {
		s := status.Convert(err)
		c.refuseNow(st, &headerError{200, s.Code(), s.Message()}, true, hold)
	} else {
		binary.BigEndian.PutUint32(out[1:5], uint32(len(out)-5))
		held = c.w.reply(st, out, hold)
	}
	if cap(out) <= 64<<10 {
		*bp = out[:0]
		outBufs.Put(bp)
	}
	st.msg = nil
	c.w.pending.Add(-1)
	if !held {
		c.forget(st) // else once its answer has gone out (writer.finished)
	}
}

// handle runs the handler; a panic in it answers INTERNAL instead of ending the
// process.
func (c *conn) handle(ctx context.Context, st *stream, call *Call, out []byte) (_ []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.s.cfg.Logger.Error("grpc: handler panicked", "method", st.method, "panic", p)
			err = status.Error(codes.Internal, fmt.Sprintf("handler panicked: %v", p))
		}
	}()
	call.Out = out
	msg, err := st.unary(ctx, call)
	if err != nil {
		return out, err
	}
	if len(msg) < 5 {
		return out, status.Error(codes.Internal, "handler answered without the 5 bytes of Call.Out")
	}
	return msg, nil
}
