package h2grpc

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
)

// A request that has not arrived whole Config.RequestTimeout after its headers is
// answered DEADLINE_EXCEEDED (a call of ours) or reset (an other call), so that a
// client that stops sending midway holds no stream and no handler waits on it.
//
// The check runs on the reader, which owns the streams' requests, when the
// connection's timer asks for it; the timer ticks every quarter of RequestTimeout, so
// a stalled request ends between RequestTimeout and 1.25 times it. A reader that read
// no frame for a whole tick cannot run the check: if a request is overdue then, its
// client sends nothing at all, and the timer closes the connection.

var errRequestStalled = errors.New("a request stopped arriving midway")

func (c *conn) stallTick() time.Duration { return c.s.cfg.RequestTimeout / 4 }

// onStallTick is the timer's: it asks the reader for a check, or closes a connection
// whose reader read nothing since the last tick while a request is overdue.
func (c *conn) onStallTick() {
	if c.ctx.Err() != nil {
		return
	}
	if c.checkDue.Swap(true) && len(c.stalled(time.Now())) > 0 {
		c.s.cfg.Logger.Debug("grpc: closing a connection whose client stopped sending", "remote", c.nc.RemoteAddr())
		c.shut(errRequestStalled)
		return
	}
	c.mu.Lock()
	t := c.stallTimer
	c.mu.Unlock()
	t.Reset(c.stallTick())
}

// stalled returns the calls whose request has not ended RequestTimeout after it began.
func (c *conn) stalled(now time.Time) []*stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	var late []*stream
	for _, st := range c.streams {
		if !st.ended.Load() && now.Sub(st.opened) > c.s.cfg.RequestTimeout && !c.s.cfg.LongLived[st.method] {
			late = append(late, st)
		}
	}
	return late
}

// failStalled, on the reader, ends every stalled request.
func (c *conn) failStalled() {
	c.checkDue.Store(false)
	for _, st := range c.stalled(time.Now()) {
		if st.local() {
			c.failStream(st, codes.DeadlineExceeded, fmt.Sprintf("grpc: request not received whole within %v", c.s.cfg.RequestTimeout))
		} else {
			c.resetStream(st.id, http2.ErrCodeCancel)
		}
	}
}
