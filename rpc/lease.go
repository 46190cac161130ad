package rpc

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/leapcount/leapcount/lease"
)

const (
	frameLease      uint8 = 5
	frameLeaseReply uint8 = 6

	// maxSetWords bounds a partition set on the wire: lease.MaxPartitions bits.
	maxSetWords = lease.MaxPartitions / 64
)

// Heartbeat answer status.
const (
	leaseReplied uint8 = iota
	leaseNoReply
)

// Exchange sends the heartbeat req to the node at addr and returns its reply. It goes
// on its own frame, never batched with ops. A request beyond the wire's bounds (lease's
// MaxNameBytes, MaxMembers, MaxPartitions) fails at once, unsent; a peer that gives no
// reply answers ErrNoLeaseReply.
func (c *Client) Exchange(ctx context.Context, addr string, req *lease.Request) (*lease.Reply, error) {
	if err := checkLeaseRequest(req); err != nil {
		return nil, err
	}
	cl := &call{lease: req}
	if err := c.call(ctx, addr, cl); err != nil {
		return nil, err
	}
	return cl.reply, nil
}

// serveLease answers a heartbeat frame. A malformed frame is an error: the connection
// is dropped.
func (s *Server) serveLease(frame []byte) ([]byte, error) {
	var req lease.Request
	id, err := decodeLeaseFrame(frame, &req)
	if err != nil {
		return nil, err
	}
	var rep *lease.Reply
	if s.lease != nil {
		rep = s.lease(&req)
	}
	if rep != nil {
		rep.Legacy = req.Legacy // answered in the format it was asked in
	}
	return appendLeaseAnswer(nil, id, rep), nil
}

func decodeLeaseFrame(frame []byte, req *lease.Request) (uint64, error) {
	d := decoder{b: frame}
	if typ := d.byte("type"); typ != frameLease && d.err == nil {
		return 0, fmt.Errorf("%w: type %d, want a heartbeat", ErrBadFrame, typ)
	}
	id := d.uvarint("id")
	d.leaseRequest(req)
	return id, d.end()
}

// appendLeaseAnswer appends the whole answer frame: rep, or why there is none.
func appendLeaseAnswer(b []byte, id uint64, rep *lease.Reply) []byte {
	b = appendHeader(b, frameLeaseReply, id)
	if err := checkLeaseReply(rep); err != nil {
		b = appendMessage(append(b, leaseNoReply), err.Error())
	} else {
		b = binary.AppendUvarint(append(b, leaseReplied), rep.Round)
		b = append(b, uint8(rep.Refused))
		b = appendSet(b, rep.Granted)
		b = appendNames(appendNames(b, rep.Voters), rep.Alive)
		if !rep.Legacy {
			b = binary.AppendUvarint(b, rep.Version)
		}
	}
	finishFrame(b, 0)
	return b
}

func appendLeaseRequest(b []byte, r *lease.Request) []byte {
	b = appendMessage(b, r.From)
	b = binary.AppendUvarint(b, r.Incarnation)
	b = binary.AppendUvarint(b, r.Round)
	b = appendSet(appendSet(b, r.Claims), r.Releases)
	b = appendNames(appendNames(b, r.Voters), r.Alive)
	if r.Legacy {
		return b
	}
	return binary.AppendUvarint(b, r.Version)
}

func appendSet(b []byte, s lease.Set) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	for _, w := range s {
		b = binary.AppendUvarint(b, w)
	}
	return b
}

func appendNames(b []byte, names []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		b = appendMessage(b, n)
	}
	return b
}

func (d *decoder) leaseRequest(r *lease.Request) {
	r.From = d.name("from")
	r.Incarnation = d.uvarint("incarnation")
	r.Round = d.uvarint("round")
	r.Claims = d.set("claims")
	r.Releases = d.set("releases")
	r.Voters = d.names("voters")
	r.Alive = d.names("alive")
	r.Version, r.Legacy = d.votersVersion()
}

// votersVersion reads the voters' version, the last field of a heartbeat or its answer,
// which versions before it do not send (legacy).
func (d *decoder) votersVersion() (version uint64, legacy bool) {
	if d.err == nil && len(d.b) == 0 {
		return 0, true
	}
	return d.uvarint("voters version"), false
}

// leaseAnswer decodes a heartbeat answer: the reply, or the peer's reason for giving
// none. A malformed answer sets d.err.
func (d *decoder) leaseAnswer() (*lease.Reply, error) {
	switch d.byte("status") {
	case leaseReplied:
	case leaseNoReply:
		msg := string(d.bytes("message"))
		return nil, fmt.Errorf("%w: %s", ErrNoLeaseReply, msg)
	default:
		d.fail("heartbeat answer status")
		return nil, nil
	}
	rep := &lease.Reply{Round: d.uvarint("round")}
	refused := lease.Refusal(d.byte("refusal"))
	if refused > lease.RefusedWrongShape {
		d.fail("refusal")
	}
	rep.Refused = refused
	rep.Granted = d.set("granted")
	rep.Voters = d.names("voters")
	rep.Alive = d.names("alive")
	rep.Version, rep.Legacy = d.votersVersion()
	return rep, nil
}

func (d *decoder) name(what string) string {
	v := d.bytes(what)
	if len(v) > lease.MaxNameBytes {
		d.fail(what)
	}
	return string(v)
}

func (d *decoder) names(what string) []string {
	n := d.count(what, 1, lease.MaxMembers)
	if n == 0 {
		return nil
	}
	names := make([]string, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		names = append(names, d.name(what))
	}
	return names
}

func (d *decoder) set(what string) lease.Set {
	n := d.count(what, 1, maxSetWords)
	if n == 0 {
		return nil
	}
	s := make(lease.Set, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		s = append(s, d.uvarint(what))
	}
	return s
}

// checkLeaseRequest is what the receiver's decoder demands of r, checked before
// sending: a frame it rejects would cost the connection and every call on it.
func checkLeaseRequest(r *lease.Request) error {
	if len(r.From) > lease.MaxNameBytes {
		return fmt.Errorf("rpc: heartbeat sender's name of %d bytes, over lease.MaxNameBytes (%d)", len(r.From), lease.MaxNameBytes)
	}
	if err := checkSet("claims", r.Claims); err != nil {
		return err
	}
	if err := checkSet("releases", r.Releases); err != nil {
		return err
	}
	if err := checkNames("voters", r.Voters); err != nil {
		return err
	}
	return checkNames("alive", r.Alive)
}

// checkLeaseReply is checkLeaseRequest for a reply (none is an error too).
func checkLeaseReply(r *lease.Reply) error {
	if r == nil {
		return fmt.Errorf("no reply (this node has no lease handler, or it gave none)")
	}
	if r.Refused > lease.RefusedWrongShape {
		return fmt.Errorf("rpc: heartbeat reply: unknown refusal %d", r.Refused)
	}
	if err := checkSet("granted", r.Granted); err != nil {
		return err
	}
	if err := checkNames("voters", r.Voters); err != nil {
		return err
	}
	return checkNames("alive", r.Alive)
}

func checkSet(what string, s lease.Set) error {
	if len(s) > maxSetWords {
		return fmt.Errorf("rpc: heartbeat %s: set of %d partitions, over lease.MaxPartitions (%d)", what, 64*len(s), lease.MaxPartitions)
	}
	return nil
}

func checkNames(what string, names []string) error {
	if len(names) > lease.MaxMembers {
		return fmt.Errorf("rpc: heartbeat %s: %d names, over lease.MaxMembers (%d)", what, len(names), lease.MaxMembers)
	}
	for _, n := range names {
		if len(n) > lease.MaxNameBytes {
			return fmt.Errorf("rpc: heartbeat %s: name of %d bytes, over lease.MaxNameBytes (%d)", what, len(n), lease.MaxNameBytes)
		}
	}
	return nil
}
