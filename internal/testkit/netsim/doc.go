// Package netsim is an in-process network for cluster fault tests, in the spirit of
// etcd-io/raft's test network and hashicorp/raft's Partition/Disconnect: the nodes of
// one test process talk through it instead of real sockets, and the test cuts, holds,
// delays and resets the links between them.
//
// Addresses are "host:port" strings chosen by the callers ("10.0.0.1:7946"); the host
// is the part before the colon, and faults are set between hosts. A host that is an IP
// literal is used in its canonical form (net.IP.String), so "::1" and "0::1" are one
// host. Nothing leaves the process: no socket is opened, whatever the addresses say.
//
// Streams (Listen, Dialer) are full-duplex net.Conns, each direction buffered up to
// StreamBuffer bytes: a Write returns once its bytes are queued and blocks only while
// the buffer is full. Packets exist only inside the memberlist transport (Transport),
// best effort as UDP is: a packet that meets a fault, a full receive queue or no
// receiver is dropped silently.
//
// # Faults
//
// Faults take effect at once, on existing streams too, and are safe to set while
// traffic flows. A link from one host to another is blocked while the pair is cut
// (Cut, Partition, Isolate) or that direction is held (Hold). On a blocked link:
//   - packets are dropped, those in flight (delayed) too;
//   - stream bytes are held: the reader does not see them, as TCP retransmitting into a
//     black hole would not deliver them, and they arrive in order once the link is
//     unblocked. Bytes that had arrived before the block stay readable; a Close's
//     end-of-stream is held like bytes;
//   - a new dial, which needs both directions (SYN and SYN-ACK), hangs until the link
//     heals (then it connects, as a retransmitted SYN would) or its context ends (then
//     it fails with a timeout).
//
// Delay makes bytes and packets of one direction arrive late; a dial waits one round
// trip. Reset closes existing streams with "connection reset" on both ends. Heal and
// HealAll unblock; they leave delays alone.
//
// # Goroutines
//
// netsim starts no goroutine of its own: blocked Reads, Writes, Accepts and dials wait
// in their callers' goroutines and return on Close, and a delayed packet is a timer.
// So closing conns, listeners and transports leaves nothing running.
package netsim

import (
	"context"
	"errors"
	"os"
)

// StreamBuffer is how many unread bytes one direction of a stream queues before a
// Write blocks: generous, so that tests see blocking only when they mean to (a reader
// that stopped, a link held for long).
const StreamBuffer = 4 << 20

// Errors. netsim fails the way real sockets do, so that code under test cannot tell
// the difference: errors from conns, listeners and dials are *net.OpError wrapping
// ErrTimeout (a deadline passed, a dial's context expired), ErrBadAddr, net.ErrClosed
// (this end was closed), or a syscall.Errno: ECONNREFUSED (no listener at the
// address), ECONNRESET (Reset, or the listener closed before accepting), EPIPE (a
// write after the peer closed), EADDRINUSE (Listen or Transport on a taken port).
// A read at the end of a stream returns io.EOF unwrapped.
var (
	// ErrTimeout has Timeout() true and matches os.ErrDeadlineExceeded and
	// context.DeadlineExceeded with errors.Is.
	ErrTimeout error = timeoutError{}
	// ErrBadAddr: an address is not "host:port" with a host and a numeric port.
	ErrBadAddr = errors.New("netsim: bad address")
)

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func (timeoutError) Is(target error) bool {
	return target == os.ErrDeadlineExceeded || target == context.DeadlineExceeded
}
