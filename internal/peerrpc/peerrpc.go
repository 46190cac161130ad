// Package peerrpc carries this project's messages over the node-to-node transport: rpc
// moves counter's ops and results, and messages of owner's (Handoffs) and lease's
// (heartbeats), without knowing any of them, and these adapters are where the two
// meet. Each translates rpc's "never sent" (rpc.ErrPeerUnreachable) into
// counter.ErrNotSent, which route and owner decide by, so that no routing decision
// depends on the transport's errors.
package peerrpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/hotkeys"
	"github.com/leapcount/leapcount/internal/wire"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/owner"
	"github.com/leapcount/leapcount/rlqs/fairshare"
	"github.com/leapcount/leapcount/rpc"
)

// Client and Server carry counter's ops, in counter's encoding.
type (
	Client = rpc.Client[counter.Op, counter.Result]
	Server = rpc.Server[counter.Op, counter.Result]
)

// NewClient returns a client of cfg that carries counter's ops.
func NewClient(cfg rpc.Config) *Client { return rpc.NewClient(cfg, counter.Wire{}) }

// Ops decides ops a peer forwarded under its ring epoch (route.Router in a node):
// HandleAsync calls done once they are, Handle waits.
type Ops interface {
	HandleAsync(ctx context.Context, epoch uint64, ops []counter.Op, results []counter.Result, done func())
	Handle(ctx context.Context, epoch uint64, ops []counter.Op, results []counter.Result)
}

// NewServer serves ops forwarded to this node (decided by ops), Handoffs (taken by
// recv; nil: refused) and heartbeats (answered by beat, in the connection's reader;
// nil: no reply).
func NewServer(ops Ops, recv owner.Receiver, beat func(*lease.Request) *lease.Reply, logger *slog.Logger) *Server {
	s := rpc.NewServer[counter.Op, counter.Result](forwardedOps{ops}, counter.Wire{}, logger)
	if recv == nil {
		recv = refuseHandoffs{}
	}
	s.HandleMessages(rpc.KindHandoff, rpc.MessageHandler{Answer: owner.HandoffAnswerer(recv), MaxBytes: owner.MaxHandoffBytes})
	s.HandleMessages(rpc.KindHeartbeat, rpc.MessageHandler{Answer: lease.Answerer(beat), InReader: true})
	return s
}

type refuseHandoffs struct{}

func (refuseHandoffs) Handoff(context.Context, *owner.Handoff) error {
	return fmt.Errorf("%w: this node takes no handoffs", owner.ErrHandoffRefused)
}

// NotSent is err with rpc's "never sent" as counter.ErrNotSent.
func NotSent(err error) error {
	if err != nil && errors.Is(err, rpc.ErrPeerUnreachable) {
		return fmt.Errorf("%w: %w", counter.ErrNotSent, err)
	}
	return err
}

// Forwarder is the rpc client as route's Forwarder.
type Forwarder struct{ C *Client }

func (f Forwarder) Do(ctx context.Context, addr string, epoch uint64, ops []counter.Op, results []counter.Result) error {
	return NotSent(f.C.Do(ctx, addr, rpc.Request[counter.Op]{Epoch: epoch, Forwarded: true, Ops: ops}, results))
}

func (f Forwarder) Go(ctx context.Context, addr string, epoch uint64, ops []counter.Op, results []counter.Result, done func(error)) {
	f.C.Go(ctx, addr, rpc.Request[counter.Op]{Epoch: epoch, Forwarded: true, Ops: ops}, results, func(err error) { done(NotSent(err)) })
}

// forwardedOps is Ops as the rpc server's handler of ops.
type forwardedOps struct{ r Ops }

func (h forwardedOps) HandleAsync(ctx context.Context, req *rpc.Request[counter.Op], results []counter.Result, done func()) {
	h.r.HandleAsync(ctx, req.Epoch, req.Ops, results, done)
}

func (h forwardedOps) Handle(ctx context.Context, req *rpc.Request[counter.Op], results []counter.Result) {
	h.r.Handle(ctx, req.Epoch, req.Ops, results)
}

// Handoffs is the rpc client as owner's Sender.
type Handoffs struct{ C *Client }

func (s Handoffs) Handoff(ctx context.Context, addr string, h *owner.Handoff) error {
	body, err := owner.EncodeHandoff(h)
	if err != nil {
		return err
	}
	return NotSent(s.C.Send(ctx, addr, rpc.KindHandoff, body, owner.ReadHandoffAck))
}

// Heartbeats is the rpc client as lease's Exchanger.
type Heartbeats struct{ C *Client }

func (x Heartbeats) Exchange(ctx context.Context, addr string, req *lease.Request) (*lease.Reply, error) {
	if err := lease.CheckRequest(req); err != nil {
		return nil, err
	}
	var rep *lease.Reply
	err := x.C.Send(ctx, addr, rpc.KindHeartbeat, lease.AppendRequest(nil, req), func(d *wire.Decoder) error {
		var err error
		rep, err = lease.ReadAnswer(d)
		return err
	})
	return rep, NotSent(err)
}

// HandleHotKeys has s answer KindHotKeys with top, this node's top keys (before Serve).
func HandleHotKeys(s *Server, top func(n int) hotkeys.Report) {
	s.HandleMessages(rpc.KindHotKeys, rpc.MessageHandler{MaxBytes: hotkeys.MaxRequestBytes,
		Answer: func(_ context.Context, body, out []byte) ([]byte, error) {
			d := wire.NewDecoder(body)
			n, flags := hotkeys.ReadRequest(&d)
			if err := d.End(); err != nil {
				return nil, err
			}
			r := top(n)
			return hotkeys.AppendReport(out, &r, flags), nil
		}})
}

// HotKeys is the rpc client asking peers for their top keys.
type HotKeys struct{ C *Client }

// Top asks the member at addr for its top n keys (1 to hotkeys.MaxTop), with flags
// (hotkeys.FlagSliced) only if it reads them.
func (h HotKeys) Top(ctx context.Context, addr string, n int, flags uint64) (hotkeys.Report, error) {
	var r hotkeys.Report
	err := h.C.Send(ctx, addr, rpc.KindHotKeys, hotkeys.AppendRequest(nil, n, flags), func(d *wire.Decoder) error {
		r = hotkeys.ReadReport(d, n, flags)
		return nil
	})
	return r, NotSent(err)
}

// HandleQuotaShare has s answer KindQuotaShare with share (before Serve).
func HandleQuotaShare(s *Server, share func(fairshare.Request) float64) {
	s.HandleMessages(rpc.KindQuotaShare, rpc.MessageHandler{MaxBytes: fairshare.MaxRequestBytes,
		Answer: func(_ context.Context, body, out []byte) ([]byte, error) {
			d := wire.NewDecoder(body)
			req := fairshare.ReadRequest(&d)
			if err := d.End(); err != nil {
				return nil, err
			}
			return fairshare.AppendShare(out, share(req)), nil
		}})
}

// QuotaShares is the rpc client asking a bucket's owner for a stream's fair share.
type QuotaShares struct{ C *Client }

// Share asks the member at addr for req's share.
func (q QuotaShares) Share(ctx context.Context, addr string, req fairshare.Request) (float64, error) {
	var v float64
	err := q.C.Send(ctx, addr, rpc.KindQuotaShare, fairshare.AppendRequest(nil, req), func(d *wire.Decoder) error {
		v = fairshare.ReadShare(d)
		return nil
	})
	return v, NotSent(err)
}
