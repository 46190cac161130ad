package owner

import (
	"reflect"
	"runtime"
	"testing"

	"github.com/leapcount/leapcount/internal/wire"
)

// Whatever a peer sends as a Handoff, the receiver never panics, allocates in
// proportion to what it read, and takes only what a sender could have sent: a frame it
// accepts passes the sender's own checks and, encoded again, reads back the same.
func FuzzReadHandoff(f *testing.F) {
	key, spec := nameOf(1), append(uv(60_000), uv(10)...)
	zero := uv(0)
	f.Add(rawHandoff(key, spec, []byte{1}, zero, zero, zero, zero))
	f.Add(rawHandoff(key, spec, []byte{0}, uv(2), uv(3), uv(4), uv(5), uv(6), zero, uv(1), nameOf(3), uv(7), nameOf(8)))
	f.Add(rawHandoff(key, spec, []byte{0}, uv(1<<31), make([]byte, 64)))
	body, err := EncodeHandoff(&Handoff{From: "n1", ID: 3, ToRun: 9, Partitions: []int{1, 7}, Fences: []HandoffFence{{WriterKey: "w", Seq: 2}}, RedisEpoch: "e"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(body)
	f.Fuzz(func(t *testing.T, frame []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var h Handoff
		d := wire.NewDecoder(frame)
		readHandoff(&d, &h)
		err := d.End()
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 64*uint64(len(frame))+64<<10 {
			t.Fatalf("a frame of %d bytes made the decoder allocate %d", len(frame), n)
		}
		if err != nil {
			return
		}
		if bad := checkHandoff(&h); bad != nil {
			t.Fatalf("accepted a handoff its sender would refuse to send: %v", bad)
		}
		var again Handoff
		d = wire.NewDecoder(appendHandoff(nil, &h))
		readHandoff(&d, &again)
		if err := d.End(); err != nil {
			t.Fatalf("re-encoded, the handoff is malformed: %v", err)
		}
		if !reflect.DeepEqual(h, again) {
			t.Fatalf("read %+v; re-encoded it reads %+v", h, again)
		}
	})
}
