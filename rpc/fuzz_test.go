package rpc

import (
	"fmt"
	"testing"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/lease"
)

// FuzzDecodeFrame feeds every decoder a frame (type byte onwards) as its receiver
// would: none may panic or allocate beyond the input's size, what one accepts the
// sender's checks accept too, and a frame sent again decodes to the same. Its seed
// corpus (testdata/fuzz/FuzzDecodeFrame) holds a frame of each type and runs with
// every go test.
func FuzzDecodeFrame(f *testing.F) {
	f.Fuzz(func(t *testing.T, frame []byte) {
		v, err := decodeAny(frame)
		if err != nil {
			return
		}
		switch v := v.(type) {
		case lease.Request:
			if err := checkLeaseRequest(&v); err != nil {
				t.Fatalf("decoded a heartbeat its sender would refuse: %v", err)
			}
		case *Handoff:
			if err := checkHandoff(v); err != nil {
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
		if a, b := fmt.Sprintf("%+v", v), fmt.Sprintf("%+v", v2); a != b {
			t.Fatalf("sent again, decodes differently:\n%s\n%s", a, b)
		}
	})
}

// leaseAnswer is what a heartbeat answer holds.
type leaseAnswer struct {
	Rep lease.Reply
	Err error
}

// decodeAny decodes frame (type byte onwards) as its receiver does.
func decodeAny(frame []byte) (any, error) {
	d := decoder{b: frame}
	typ := d.byte("type")
	switch typ {
	case frameRequest:
		var req Request
		_, err := decodeRequestFrame(frame, &req)
		return req, err
	case frameLease:
		var req lease.Request
		_, err := decodeLeaseFrame(frame, &req)
		return req, err
	case frameHandoff:
		var h Handoff
		d.uvarint("id")
		d.handoff(&h)
		return &h, d.end()
	case frameResponse:
		d.uvarint("id")
		peek := d
		res := make([]counter.Result, peek.count("result count", 2, MaxFrameBytes))
		d.results(res)
		return res, d.end()
	case frameHandoffAck:
		d.uvarint("id")
		return decodeHandoffAck(&d), d.end()
	case frameLeaseReply:
		d.uvarint("id")
		rep, err := d.leaseAnswer()
		var a leaseAnswer
		if rep != nil {
			a.Rep = *rep
		}
		a.Err = err
		return a, d.end()
	}
	return nil, fmt.Errorf("%w: type %d", ErrBadFrame, typ)
}

// encodeAny encodes what decodeAny returned (nil for answers that carry an error).
func encodeAny(v any) []byte {
	var b []byte
	switch v := v.(type) {
	case Request:
		b = appendRequestFrame(nil, 1, v)
	case lease.Request:
		b = appendHeader(nil, frameLease, 1)
		b = appendLeaseRequest(b, &v)
		finishFrame(b, 0)
	case *Handoff:
		b = appendHeader(nil, frameHandoff, 1)
		b = appendHandoff(b, v)
		finishFrame(b, 0)
	case leaseAnswer:
		if v.Err != nil {
			return nil
		}
		b = appendLeaseAnswer(nil, 1, &v.Rep)
	case []counter.Result:
		for i := range v {
			if v[i].Err != nil {
				return nil
			}
		}
		b = appendResponse(nil, 1, v)
	default: // a handoff ack
		if v != nil {
			return nil
		}
		b = appendHeader(nil, frameHandoffAck, 1)
		b = append(b, ackApplied)
		finishFrame(b, 0)
	}
	return b[4:]
}
