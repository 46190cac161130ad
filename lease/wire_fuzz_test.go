package lease

import (
	"reflect"
	"testing"

	"github.com/leapcount/leapcount/internal/wire"
)

// Whatever a peer sends as a heartbeat, the receiver never panics and takes only what
// reads back the same once encoded again (what it read must be what the sender meant).
func FuzzReadRequest(f *testing.F) {
	zero := uv(0)
	f.Add(heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, zero, zero))
	f.Add(heartbeat(nameOf(1), zero, zero, zero, zero, zero, zero, zero))
	f.Add(heartbeat(nameOf(0), zero, zero, zero, zero, zero, zero, zero, []byte{2}, uv(3), uv(7), nameOf(2), namesOf(2, 2), zero))
	f.Add(AppendRequest(nil, &Request{From: "n1", Incarnation: 3, Round: 7, Claims: testSet(256, 0, 130),
		Drops: testSet(256), Voters: []string{"n1", "n2"}, Version: 4, Alive: []string{"n2"}, SentAt: 1_700_000_000_000}))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := readRequest(body)
		if err != nil {
			return
		}
		again, err := readRequest(AppendRequest(nil, &r))
		if err != nil {
			t.Fatalf("re-encoded, the heartbeat is malformed: %v", err)
		}
		if !reflect.DeepEqual(r, again) {
			t.Fatalf("read %+v; re-encoded it reads %+v", r, again)
		}
	})
}

// Whatever a peer answers to a heartbeat, the sender never panics, and a reply it
// accepts reads back the same once encoded again.
func FuzzReadAnswer(f *testing.F) {
	f.Add(AppendAnswer(nil, &Reply{Round: 7, Granted: testSet(256, 63, 130), Voters: []string{"n1", "n2"}, Version: 9, Alive: []string{"n2"},
		ReceivedAt: 1_700_000_000_000, RepliedAt: 1_700_000_000_001}))
	f.Add(AppendAnswer(nil, &Reply{Round: 1, Refused: RefusedWrongShape, Granted: testSet(64)}))
	f.Add(AppendAnswer(nil, nil))
	f.Fuzz(func(t *testing.T, body []byte) {
		d := wire.NewDecoder(body)
		rep, err := ReadAnswer(&d)
		if d.End() != nil || err != nil {
			return
		}
		d = wire.NewDecoder(AppendAnswer(nil, rep))
		again, err := ReadAnswer(&d)
		if err != nil || d.End() != nil {
			t.Fatalf("re-encoded, the answer is malformed or no reply: %v, %v", err, d.End())
		}
		if !reflect.DeepEqual(rep, again) {
			t.Fatalf("read %+v; re-encoded it reads %+v", rep, again)
		}
	})
}
