package netsim

import (
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// pipe is one direction of a stream: what one end writes and the other reads. Bytes
// queue as chunks stamped with the time they may arrive (now plus the link's delay);
// the reader takes a chunk once that time has passed and the link is not blocked.
type pipe struct {
	link link // fixed: the hosts of the writing and the reading end

	mu sync.Mutex
	// changed is closed and replaced on every change a blocked Read or Write may be
	// waiting for (bytes queued or read, a fault, a deadline, a close): a broadcast,
	// because net.Conn allows concurrent Reads or Writes on one end.
	changed chan struct{}
	chunks  []chunk
	off     int  // bytes of chunks[0] already read
	queued  int  // unread bytes in chunks, against StreamBuffer
	arrived int  // leading chunks that reached the reader before the link was blocked
	blocked bool // the link is cut or held
	delay   time.Duration
	wClosed bool  // the writing end closed: an eof chunk is queued
	rClosed bool  // the reading end closed: writes fail, nothing is queued
	err     error // set by a reset: every read and write fails with it

	readDeadline  time.Time // the reading end's
	writeDeadline time.Time // the writing end's
}

// chunk is bytes written by one Write (or the part that fit), or the end of stream.
type chunk struct {
	b   []byte
	at  time.Time // when it may arrive
	eof bool
}

func newPipe(l link, blocked bool, delay time.Duration) *pipe {
	return &pipe{link: l, changed: make(chan struct{}), blocked: blocked, delay: delay}
}

func (p *pipe) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// waitLocked releases the lock until something changes or until passes (never, when
// zero), then takes it again.
func (p *pipe) waitLocked(until time.Time) {
	ch := p.changed
	p.mu.Unlock()
	defer p.mu.Lock()
	if until.IsZero() {
		<-ch
		return
	}
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}

// read is the reading end's Read: the errors are bare; conn wraps them.
func (p *pipe) read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		switch {
		case p.rClosed:
			return 0, net.ErrClosed
		case p.err != nil:
			return 0, p.err
		}
		now := time.Now()
		n, eof, next := p.takeLocked(b, now)
		if n > 0 {
			p.signalLocked() // room for a blocked writer
			return n, nil
		}
		if len(b) == 0 {
			return 0, nil
		}
		if eof {
			return 0, io.EOF
		}
		if !p.readDeadline.IsZero() && !now.Before(p.readDeadline) {
			return 0, ErrTimeout
		}
		if next.IsZero() || (!p.readDeadline.IsZero() && p.readDeadline.Before(next)) {
			next = p.readDeadline
		}
		p.waitLocked(next)
	}
}

// takeLocked copies into b the bytes that have arrived by now, in order. It reports
// eof when the next thing to arrive is the end of the stream, and otherwise when the
// next chunk will arrive (zero: not before a change).
func (p *pipe) takeLocked(b []byte, now time.Time) (n int, eof bool, next time.Time) {
	for len(p.chunks) > 0 && n < len(b) {
		c := p.chunks[0]
		if p.arrived == 0 && (p.blocked || c.at.After(now)) {
			if !p.blocked {
				next = c.at
			}
			return n, false, next
		}
		if c.eof {
			return n, true, next
		}
		k := copy(b[n:], c.b[p.off:])
		n += k
		p.off += k
		p.queued -= k
		if p.off == len(c.b) {
			p.chunks[0] = chunk{} // let the bytes be collected
			p.chunks = p.chunks[1:]
			p.off = 0
			p.arrived = max(p.arrived-1, 0)
		}
	}
	return n, false, next
}

// write is the writing end's Write: it queues all of b, waiting for room while the
// buffer is full.
func (p *pipe) write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	written := 0
	for {
		switch {
		case p.wClosed:
			return written, net.ErrClosed
		case p.err != nil:
			return written, p.err
		case p.rClosed:
			return written, syscall.EPIPE
		case !p.writeDeadline.IsZero() && !time.Now().Before(p.writeDeadline):
			return written, ErrTimeout
		case len(b) == 0:
			return written, nil
		}
		if room := StreamBuffer - p.queued; room > 0 {
			k := min(room, len(b))
			p.chunks = append(p.chunks, chunk{b: append([]byte(nil), b[:k]...), at: time.Now().Add(p.delay)})
			p.queued += k
			written += k
			b = b[k:]
			p.signalLocked()
			continue
		}
		p.waitLocked(p.writeDeadline)
	}
}

// closeWrite queues the end of stream, which arrives after the bytes before it.
func (p *pipe) closeWrite() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.wClosed {
		p.wClosed = true
		p.chunks = append(p.chunks, chunk{at: time.Now().Add(p.delay), eof: true})
		p.signalLocked()
	}
}

// closeRead drops what is queued: nobody will read it, and the writer's next write
// fails (EPIPE).
func (p *pipe) closeRead() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rClosed = true
	p.dropLocked()
	p.signalLocked()
}

func (p *pipe) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = syscall.ECONNRESET
	}
	p.dropLocked()
	p.signalLocked()
}

func (p *pipe) dropLocked() {
	p.chunks, p.off, p.queued, p.arrived = nil, 0, 0, 0
}

// setLink applies the link's faults. When the link becomes blocked, the chunks whose
// time has come have arrived: they stay readable, as bytes in a receive buffer do.
func (p *pipe) setLink(blocked bool, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if blocked && !p.blocked {
		now := time.Now()
		for p.arrived < len(p.chunks) && !p.chunks[p.arrived].at.After(now) {
			p.arrived++
		}
	}
	if blocked != p.blocked || delay != p.delay {
		p.blocked, p.delay = blocked, delay
		p.signalLocked()
	}
}

func (p *pipe) setReadDeadline(t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.readDeadline = t
	p.signalLocked()
}

func (p *pipe) setWriteDeadline(t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writeDeadline = t
	p.signalLocked()
}
