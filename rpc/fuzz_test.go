package rpc

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/wire"
	"github.com/leapcount/leapcount/lease"
	owners "github.com/leapcount/leapcount/owner"
)

// FuzzDecodeFrame feeds a frame (type byte onwards) to the decoder its receiver would
// use (ops and their answers, and the messages a node carries: heartbeats, handoffs
// and their answers, in their packages' encodings): none may panic or allocate beyond
// the input's size, what one accepts the sender's checks accept too, and a frame sent
// again decodes to the same. Its seed corpus (testdata/fuzz/FuzzDecodeFrame) holds a
// frame of each type and runs with every go test.
func FuzzDecodeFrame(f *testing.F) {
	f.Fuzz(func(t *testing.T, frame []byte) {
		v, err := decodeAny(frame)
		if err != nil {
			return
		}
		switch v := v.(type) {
		case lease.Request:
			if err := lease.CheckRequest(&v); err != nil {
				t.Fatalf("decoded a heartbeat its sender would refuse: %v", err)
			}
		case *owners.Handoff:
			if _, err := owners.EncodeHandoff(v); err != nil {
				t.Fatalf("decoded a handoff its sender would refuse: %v", err)
			}
		}
		again := encodeAny(v)
		if again == nil {
			return // an answer carrying an error: its message is not kept as is
		}
		v2, err := decodeAny(again)
		if err != nil {
			t.Fatalf("sent again, %+v does not decode: %v", v, err)
		}
		if !reflect.DeepEqual(v, v2) { // (not by %+v: a heartbeat's change is a pointer)
			t.Fatalf("sent again, decodes differently:\n%+v\n%+v", v, v2)
		}
	})
}

// leaseAnswer is what a heartbeat answer holds.
type leaseAnswer struct {
	Rep lease.Reply
	Err error
}

// handoffAck is what a handoff's answer holds.
type handoffAck struct{ Err error }

// handoffSink takes any handoff, keeping the last.
type handoffSink struct{ got *owners.Handoff }

func (s *handoffSink) Handoff(_ context.Context, h *owners.Handoff) error {
	s.got = h
	return nil
}

// decodeAny decodes frame (type byte onwards) as its receiver does.
func decodeAny(frame []byte) (any, error) {
	d := wire.NewDecoder(frame)
	typ := d.Byte("type")
	switch typ {
	case frameRequest:
		var req testRequest
		_, err := decodeRequestFrame(frame, &req)
		return req, err
	case frameResponse:
		d.Uvarint("id")
		peek := d
		res := make([]counter.Result, peek.Count("result count", 2, MaxFrameBytes))
		readResults(&d, counter.Wire{}, res)
		return res, d.End()
	}
	id := d.Uvarint("id")
	if err := d.Err(); err != nil {
		return nil, err
	}
	switch Kind(typ) {
	case KindHeartbeat:
		var req lease.Request
		lease.ReadRequest(&d, &req)
		return req, d.End()
	case KindHeartbeat + 1:
		rep, err := lease.ReadAnswer(&d)
		var a leaseAnswer
		if rep != nil {
			a.Rep = *rep
		}
		a.Err = err
		return a, d.End()
	case KindHandoff:
		if len(frame)+4 > owners.MaxHandoffBytes {
			return nil, fmt.Errorf("%w: handoff too large", ErrBadFrame)
		}
		sink := &handoffSink{}
		_, err := owners.HandoffAnswerer(sink)(context.Background(), d.Rest(), nil)
		return sink.got, err
	case KindHandoff + 1:
		return handoffAck{owners.ReadHandoffAck(&d)}, d.End()
	}
	_ = id
	return nil, fmt.Errorf("%w: type %d", ErrBadFrame, typ)
}

// encodeAny encodes what decodeAny returned (nil for answers that carry an error).
func encodeAny(v any) []byte {
	var b []byte
	switch v := v.(type) {
	case testRequest:
		b = encodeRequestFrame(nil, 1, v)
	case lease.Request:
		b = appendHeader(nil, uint8(KindHeartbeat), 1)
		b = lease.AppendRequest(b, &v)
		finishFrame(b, 0)
	case *owners.Handoff:
		body, err := owners.EncodeHandoff(v)
		if err != nil {
			panic(err)
		}
		b = append(appendHeader(nil, uint8(KindHandoff), 1), body...)
		finishFrame(b, 0)
	case leaseAnswer:
		if v.Err != nil {
			return nil
		}
		b = lease.AppendAnswer(appendHeader(nil, uint8(KindHeartbeat)+1, 1), &v.Rep)
		finishFrame(b, 0)
	case []counter.Result:
		for i := range v {
			if v[i].Err != nil {
				return nil
			}
		}
		b = appendResponse(nil, 1, v)
	case handoffAck:
		if v.Err != nil {
			return nil
		}
		b = append(appendHeader(nil, uint8(KindHandoff)+1, 1), 0) // applied
		finishFrame(b, 0)
	default:
		return nil
	}
	return b[4:]
}
