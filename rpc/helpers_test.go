package rpc

import (
	"context"
	"log/slog"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/wire"
)

// The tests carry counter's ops, in counter's encoding, as a node does.
type (
	testClient      = Client[counter.Op, counter.Result]
	testServer      = Server[counter.Op, counter.Result]
	testRequest     = Request[counter.Op]
	testHandlerFunc = HandlerFunc[counter.Op, counter.Result]
)

func newTestClient(cfg Config) *testClient { return NewClient(cfg, counter.Wire{}) }

func newTestServer(h Handler[counter.Op, counter.Result], logger *slog.Logger) *testServer {
	return NewServer(h, counter.Wire{}, logger)
}

// wireServer is a server with nothing but counter's codec, for its encoders and
// decoders.
var wireServer = &testServer{codec: counter.Wire{}}

func decodeRequestFrame(frame []byte, req *testRequest) (uint64, error) {
	return wireServer.decodeRequestFrame(new(wire.Decoder), frame, req)
}

func appendResponse(b []byte, id uint64, results []counter.Result) []byte {
	return wireServer.appendResponse(b, id, results)
}

// appendRequestFrame encodes a whole request frame (the client builds it from calls),
// with a minute's budget when req's Budget is zero: a test frame expires only when its
// Budget says so (a negative one is spent already, 0 on the wire). encodeRequestFrame
// encodes req's Budget as it is.
func appendRequestFrame(b []byte, id uint64, req testRequest) []byte {
	if req.Budget == 0 {
		req.Budget = time.Minute
	}
	return encodeRequestFrame(b, id, req)
}

func encodeRequestFrame(b []byte, id uint64, req testRequest) []byte {
	b = appendHeader(b, frameRequest, id)
	h := head{epoch: req.Epoch, forwarded: req.Forwarded, budget: req.Budget}
	b = appendRequestHead(b, &h, len(req.Ops))
	for i := range req.Ops {
		b = counter.Wire{}.AppendOp(b, &req.Ops[i])
	}
	finishFrame(b, 0)
	return b
}

// decodeAnswer decodes an answer frame's body (type byte onwards) into res.
func decodeAnswer(frame []byte, res []counter.Result) error {
	d := wire.NewDecoder(frame[1:])
	d.Uvarint("id")
	readResults(&d, counter.Wire{}, res)
	return d.End()
}

// echoHeartbeats makes a server answer heartbeats and handoffs with their own bodies,
// heartbeats in the reader (as a node does), handoffs on goroutines.
func echoHeartbeats(s *testServer) {
	echo := func(_ context.Context, body, out []byte) ([]byte, error) { return append(out, body...), nil }
	s.HandleMessages(KindHeartbeat, MessageHandler{Answer: echo, InReader: true})
	s.HandleMessages(KindHandoff, MessageHandler{Answer: echo, MaxBytes: 1 << 10})
}

// sendEcho sends msg as a message of kind k and returns the answer's body.
func sendEcho(c *testClient, addr string, k Kind, msg string) (string, error) {
	var back string
	err := c.Send(context.Background(), addr, k, []byte(msg), func(d *wire.Decoder) error {
		back = string(d.Rest())
		return nil
	})
	return back, err
}
