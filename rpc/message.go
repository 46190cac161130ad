package rpc

import (
	"context"
)

// Kind is a message that goes on a frame of its own, never batched with ops, in the
// encoding of the package that defines it. Its answer comes on a frame of type Kind+1.
type Kind uint8

const (
	// KindHandoff: counters moving between owners (package owner's Handoff).
	KindHandoff Kind = 3
	// KindHeartbeat: a lease heartbeat (package lease's). MarkDown does not stop it: it
	// is how a peer is heard from again.
	KindHeartbeat Kind = 5
	// KindHotKeys: a node's top keys (package hotkeys' wire.go), sent only to members
	// that advertise it in gossip, since a release before it drops the connection of a
	// kind it does not know.
	KindHotKeys Kind = 7
	// KindQuotaShare: an RLQS stream's fair share of a bucket, asked of the bucket's
	// owner (package fairshare's share.go), sent only to members that advertise it.
	KindQuotaShare Kind = 9
)

// MessageHandler answers one kind of message on a Server.
type MessageHandler struct {
	// Answer decodes body and appends its answer's body to out. An error wrapping
	// ErrBadFrame (wire.ErrMalformed) says body was malformed: the connection is
	// dropped. Any refusal the sender should hear goes in the answer.
	Answer func(ctx context.Context, body, out []byte) ([]byte, error)
	// MaxBytes bounds the frame (its length prefix included); a larger one is
	// malformed. 0: MaxFrameBytes.
	MaxBytes int
	// InReader answers the message in the connection's reader goroutine, in order:
	// Answer must then be fast and never wait. Such messages do not count as activity
	// for IdleFor (heartbeats never stop while a node is a member). Otherwise each is
	// answered in a goroutine of its own, so that one that waits holds up no other.
	InReader bool
}

// HandleMessages sets who answers messages of kind k (before Serve). A message of a
// kind without a handler is malformed: the connection is dropped.
func (s *Server[O, R]) HandleMessages(k Kind, h MessageHandler) {
	if h.MaxBytes <= 0 {
		h.MaxBytes = MaxFrameBytes
	}
	s.messages[k] = &h
}
