package lease

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/leapcount/leapcount/internal/wire"
)

// How heartbeats travel between nodes (package rpc carries them as messages of their
// own kind). A heartbeat is name from | uvarint incarnation | uvarint round | set claims |
// set drops | names voters | names alive | uvarint voters version | change message |
// varint sent at. Its answer is u8 status (0 replied, 1 no reply) and then uvarint
// round | u8 refusal | set granted | names voters | names alive | uvarint voters version
// | change state | varint received at | varint replied at [| names silent], or name message.
// The silent names are left out when there are none (as they are, all but in a fault):
// a node of an earlier version then reads the reply too. A name is uvarint length | bytes (at most MaxNameBytes), names a
// uvarint count (at most MaxMembers) of names, a set a uvarint count of uvarint 64-bit
// words (at most MaxPartitions bits). Every field is required: a frame that lacks one,
// or has bytes after the last, is malformed.

// ErrNoReply: the peer answered a heartbeat without a reply: it has no lease handler,
// or its reply did not fit the wire's bounds.
var ErrNoReply = errors.New("lease: peer gave no heartbeat reply")

// maxSetWords bounds a partition set on the wire: MaxPartitions bits.
const maxSetWords = MaxPartitions / 64

// Heartbeat answer status.
const (
	replied uint8 = iota
	noReply
)

// AppendRequest appends r in the wire's encoding. CheckRequest says whether a
// receiver will take it.
func AppendRequest(b []byte, r *Request) []byte {
	b = wire.AppendString(b, r.From)
	b = binary.AppendUvarint(b, r.Incarnation)
	b = binary.AppendUvarint(b, r.Round)
	b = appendSet(appendSet(b, r.Claims), r.Drops)
	b = appendNames(appendNames(b, r.Voters), r.Alive)
	b = binary.AppendUvarint(b, r.Version)
	b = appendChangeMsg(b, r.Change)
	return binary.AppendVarint(b, r.SentAt)
}

// ReadRequest reads a heartbeat into r; the decoder's error says if it was malformed.
func ReadRequest(d *wire.Decoder, r *Request) {
	r.From = name(d, "from")
	r.Incarnation = d.Uvarint("incarnation")
	r.Round = d.Uvarint("round")
	r.Claims = set(d, "claims")
	r.Drops = set(d, "drops")
	r.Voters = names(d, "voters")
	r.Alive = names(d, "alive")
	r.Version = d.Uvarint("voters version")
	r.Change = readChangeMsg(d)
	r.SentAt = d.Varint("sent at")
}

// AppendAnswer appends the answer to a heartbeat: rep, or why there is none.
func AppendAnswer(b []byte, rep *Reply) []byte {
	if err := checkReply(rep); err != nil {
		return wire.AppendString(append(b, noReply), err.Error())
	}
	b = binary.AppendUvarint(append(b, replied), rep.Round)
	b = append(b, uint8(rep.Refused))
	b = appendSet(b, rep.Granted)
	b = appendNames(appendNames(b, rep.Voters), rep.Alive)
	b = binary.AppendUvarint(b, rep.Version)
	b = appendChangeState(b, rep.Change)
	b = binary.AppendVarint(binary.AppendVarint(b, rep.ReceivedAt), rep.RepliedAt)
	if len(rep.Silent) > 0 {
		b = appendNames(b, rep.Silent)
	}
	return b
}

// ReadAnswer reads a heartbeat's answer: the reply, or the peer's reason for giving
// none (ErrNoReply). The decoder's error says if it was malformed.
func ReadAnswer(d *wire.Decoder) (*Reply, error) {
	switch d.Byte("status") {
	case replied:
	case noReply:
		msg := string(d.Bytes("message"))
		return nil, fmt.Errorf("%w: %s", ErrNoReply, msg)
	default:
		d.Fail("heartbeat answer status")
		return nil, nil
	}
	rep := &Reply{Round: d.Uvarint("round")}
	refused := Refusal(d.Byte("refusal"))
	if refused > RefusedWrongShape {
		d.Fail("refusal")
	}
	rep.Refused = refused
	rep.Granted = set(d, "granted")
	rep.Voters = names(d, "voters")
	rep.Alive = names(d, "alive")
	rep.Version = d.Uvarint("voters version")
	rep.Change = readChangeState(d)
	rep.ReceivedAt = d.Varint("received at")
	rep.RepliedAt = d.Varint("replied at")
	if d.Err() == nil && d.Len() > 0 {
		rep.Silent = names(d, "silent")
	}
	return rep, nil
}

// Answerer answers heartbeats that arrive as bytes (rpc.MessageHandler's Answer), with
// handle (Keeper.Handle in a node; nil: no reply). It is called in the connection's
// reader, so handle must be fast and never wait.
func Answerer(handle func(*Request) *Reply) func(ctx context.Context, body, out []byte) ([]byte, error) {
	return func(_ context.Context, body, out []byte) ([]byte, error) {
		var req Request
		d := wire.NewDecoder(body)
		ReadRequest(&d, &req)
		if err := d.End(); err != nil {
			return nil, err
		}
		var rep *Reply
		if handle != nil {
			rep = handle(&req)
		}
		return AppendAnswer(out, rep), nil
	}
}

func appendSet(b []byte, s Set) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	for _, w := range s {
		b = binary.AppendUvarint(b, w)
	}
	return b
}

func appendNames(b []byte, names []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		b = wire.AppendString(b, n)
	}
	return b
}

func name(d *wire.Decoder, what string) string {
	v := d.Bytes(what)
	if len(v) > MaxNameBytes {
		d.Fail(what)
	}
	return string(v)
}

func names(d *wire.Decoder, what string) []string {
	n := d.Count(what, 1, MaxMembers)
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		out = append(out, name(d, what))
	}
	return out
}

func set(d *wire.Decoder, what string) Set {
	n := d.Count(what, 1, maxSetWords)
	if n == 0 {
		return nil
	}
	s := make(Set, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		s = append(s, d.Uvarint(what))
	}
	return s
}

// CheckRequest is what the receiver's decoder demands of r, checked before sending: a
// frame it rejects would cost the connection and every call on it.
func CheckRequest(r *Request) error {
	if len(r.From) > MaxNameBytes {
		return fmt.Errorf("lease: heartbeat sender's name of %d bytes, over lease.MaxNameBytes (%d)", len(r.From), MaxNameBytes)
	}
	if err := checkSet("claims", r.Claims); err != nil {
		return err
	}
	if err := checkSet("drops", r.Drops); err != nil {
		return err
	}
	if err := checkNames("voters", r.Voters); err != nil {
		return err
	}
	if m := r.Change; m != nil {
		if err := checkChange(m.Value, m.Ballot); err != nil {
			return err
		}
	}
	return checkNames("alive", r.Alive)
}

// checkChange is what the decoder demands of a change message's or state's value and
// ballots.
func checkChange(value []string, ballots ...Ballot) error {
	for _, b := range ballots {
		if len(b.By) > MaxNameBytes {
			return fmt.Errorf("lease: heartbeat change: ballot name of %d bytes, over lease.MaxNameBytes (%d)", len(b.By), MaxNameBytes)
		}
	}
	return checkNames("change", value)
}

// checkReply is CheckRequest for a reply (none is an error too).
func checkReply(r *Reply) error {
	if r == nil {
		return fmt.Errorf("no reply (this node has no lease handler, or it gave none)")
	}
	if r.Refused > RefusedWrongShape {
		return fmt.Errorf("lease: heartbeat reply: unknown refusal %d", r.Refused)
	}
	if err := checkSet("granted", r.Granted); err != nil {
		return err
	}
	if err := checkNames("voters", r.Voters); err != nil {
		return err
	}
	if st := r.Change; st != nil {
		if err := checkChange(st.Value, st.Promised, st.Accepted); err != nil {
			return err
		}
	}
	if err := checkNames("silent", r.Silent); err != nil {
		return err
	}
	return checkNames("alive", r.Alive)
}

func checkSet(what string, s Set) error {
	if len(s) > maxSetWords {
		return fmt.Errorf("lease: heartbeat %s: set of %d partitions, over lease.MaxPartitions (%d)", what, 64*len(s), MaxPartitions)
	}
	return nil
}

func checkNames(what string, names []string) error {
	if len(names) > MaxMembers {
		return fmt.Errorf("lease: heartbeat %s: %d names, over lease.MaxMembers (%d)", what, len(names), MaxMembers)
	}
	for _, n := range names {
		if len(n) > MaxNameBytes {
			return fmt.Errorf("lease: heartbeat %s: name of %d bytes, over lease.MaxNameBytes (%d)", what, len(n), MaxNameBytes)
		}
	}
	return nil
}

// A change message is u8 phase (0 none, 1 prepare, 2 accept) and then uvarint base |
// ballot | names value; a ballot is uvarint number | name proposer. An acceptor's state
// is u8 present (0 or 1) and then uvarint base | ballot promised | ballot accepted |
// names value.

func appendChangeMsg(b []byte, m *ChangeMsg) []byte {
	switch {
	case m == nil:
		return append(b, 0)
	case m.Accept:
		b = append(b, 2)
	default:
		b = append(b, 1)
	}
	b = appendBallot(binary.AppendUvarint(b, m.Base), m.Ballot)
	return appendNames(b, m.Value)
}

func readChangeMsg(d *wire.Decoder) *ChangeMsg {
	phase := d.Byte("change phase")
	if phase == 0 {
		return nil
	}
	if phase > 2 {
		d.Fail("change phase")
		return nil
	}
	m := &ChangeMsg{Base: d.Uvarint("change base"), Accept: phase == 2}
	m.Ballot = ballot(d, "change ballot")
	m.Value = names(d, "change value")
	return m
}

func appendChangeState(b []byte, st *ChangeState) []byte {
	if st == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(append(b, 1), st.Base)
	b = appendBallot(appendBallot(b, st.Promised), st.Accepted)
	return appendNames(b, st.Value)
}

func readChangeState(d *wire.Decoder) *ChangeState {
	switch d.Byte("change state") {
	case 0:
		return nil
	case 1:
	default:
		d.Fail("change state")
		return nil
	}
	st := &ChangeState{Base: d.Uvarint("change base")}
	st.Promised = ballot(d, "promised ballot")
	st.Accepted = ballot(d, "accepted ballot")
	st.Value = names(d, "accepted value")
	return st
}

func appendBallot(b []byte, bl Ballot) []byte {
	return wire.AppendString(binary.AppendUvarint(b, bl.N), bl.By)
}

func ballot(d *wire.Decoder, what string) Ballot {
	n := d.Uvarint(what)
	return Ballot{N: n, By: name(d, what)}
}
