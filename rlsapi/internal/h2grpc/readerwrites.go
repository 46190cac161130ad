package h2grpc

// The reader writes the answers it queued before it reads again (flush), so that an
// answer decided on the reader needs no wake-up of the writer's loop.

import "io"

// maxDeferred bounds the bytes queued for the reader to write before its next read
// (flush): past it the loop is woken to write them now.
const maxDeferred = 64 << 10

// queued ends an append: it wakes the loop, unless the reader writes the frames
// before it reads again; w.mu is held.
func (w *writer) queued() {
	if w.idle && !(w.readerWrites && len(w.buf) <= maxDeferred) {
		w.ready.Signal()
	}
}

// read is the reader's read: it flushes what is queued first, and what it queues
// until the next read it will flush then, without waking the loop.
func (w *writer) read(r io.Reader, p []byte) (int, error) {
	w.flush()
	n, err := r.Read(p)
	if n > 0 && err == nil {
		w.mu.Lock()
		w.readerWrites = true
		w.mu.Unlock()
	}
	return n, err
}

// readFlusher is the connection as its reader reads it (writer.read).
type readFlusher struct {
	w *writer
	r io.Reader
}

func (f readFlusher) Read(p []byte) (int, error) { return f.w.read(f.r, p) }

// flush writes what is queued when the loop is idle, on the reader before it reads
// again: the kernel takes what it can without waiting, and the loop is woken for the
// rest. Waking the loop's goroutine for every batch of answers costs a thread's
// wake-up when the process has an idle P, which on shared cores is most of a small
// call's cost. Without a socket to write to without waiting (TLS), it wakes the loop.
func (w *writer) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.readerWrites = false
	if len(w.buf) == 0 || !w.idle || w.err != nil {
		return // the loop, busy, writes it after what it writes now
	}
	if w.raw == nil || w.writing || w.closing {
		w.ready.Signal()
		return
	}
	out := w.buf
	w.buf, w.spare = w.spare[:0], nil
	w.writing = true
	w.room.Broadcast()
	w.mu.Unlock()
	n, err := tryWrite(w.raw, out)
	w.mu.Lock()
	w.writing = false
	switch {
	case err != nil:
		w.fail(err)
		return
	case n == len(out):
		if cap(out) <= maxQueued && w.spare == nil {
			w.spare = out[:0]
		}
	default: // the rest goes first, before what was queued meanwhile
		w.buf = append(out[:copy(out, out[n:])], w.buf...)
	}
	if len(w.buf) > 0 || w.closing {
		w.ready.Signal()
	}
}
