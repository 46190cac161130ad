package h2grpc

import (
	"context"
	"sync"
	"time"
)

// callCtx is a call's context: the connection's, bounded by the call's grpc-timeout
// and ended by a reset. context.WithTimeout would arm a timer and join the
// connection's context for every call, though most handlers only read the deadline
// and the error; so the standard context behind it, timer and all, is made only when
// someone asks for Done (BenchmarkCallContext).
type callCtx struct {
	parent   context.Context
	deadline time.Time // zero: none

	mu        sync.Mutex
	cancelled bool            // cancel was called
	std       context.Context // made by the first Done (nil: not yet)
	cancelStd context.CancelFunc
}

// start makes c the context of a call that began now; it is called once, before the
// handler gets c.
func (c *callCtx) start(parent context.Context, timeout time.Duration) {
	c.parent = parent
	if timeout > 0 {
		c.deadline = time.Now().Add(timeout)
	}
}

func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }

// Done makes the standard context, which from then on answers for this one.
func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.standard().Done()
}

// standard returns the standard context, made on the first call; c.mu is held.
func (c *callCtx) standard() context.Context {
	if c.std == nil {
		if c.deadline.IsZero() {
			c.std, c.cancelStd = context.WithCancel(c.parent)
		} else {
			c.std, c.cancelStd = context.WithDeadline(c.parent, c.deadline)
		}
		if c.cancelled {
			c.cancelStd()
		}
	}
	return c.std
}

func (c *callCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.std != nil:
		return c.std.Err()
	case c.cancelled:
		return context.Canceled
	case !c.deadline.IsZero() && !time.Now().Before(c.deadline):
		return context.DeadlineExceeded
	}
	return c.parent.Err()
}

// Value looks key up in the standard context once it is made: a context derived from
// this one then finds it by the context package's own key, and joins it as a child
// instead of watching it from a goroutine of its own.
func (c *callCtx) Value(key any) any {
	c.mu.Lock()
	std := c.std
	c.mu.Unlock()
	if std != nil {
		return std.Value(key)
	}
	return c.parent.Value(key)
}

// cancel ends the context (its call was reset, or has ended).
func (c *callCtx) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancelled = true
	if c.cancelStd != nil {
		c.cancelStd()
	}
}
