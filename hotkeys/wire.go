package hotkeys

import (
	"encoding/binary"

	"github.com/leapcount/leapcount/internal/wire"
)

// How a node asks a peer for its top keys (a message of its own kind, rpc.KindHotKeys,
// sent only to members that advertise it): the request is uvarint n (1 to MaxTop); the
// answer is uvarint span_ms | uvarint sample_every | uvarint count (at most n) | keys,
// each string key | uvarint ops | uvarint low | uvarint high | uvarint error. A string
// is uvarint length | bytes, at most MaxKeyBytes. Every field is required: a frame that
// lacks one, or has bytes after the last, is malformed. An answer stops short of
// MaxReportBytes: the keys that would pass it are left out, the least counted first.

// Bounds of the wire: the most keys one asks for, and the longest key it carries.
const (
	MaxTop         = 1000
	MaxKeyBytes    = 1 << 20 // as long as a node takes (--max-key-bytes)
	MaxReportBytes = 4 << 20
	// MaxRequestBytes bounds a request's frame (its length prefix and type included).
	MaxRequestBytes = 64
)

// AppendRequest appends a request for the top n keys.
func AppendRequest(b []byte, n int) []byte { return binary.AppendUvarint(b, uint64(n)) }

// ReadRequest reads a request; the decoder's error says if it was malformed.
func ReadRequest(d *wire.Decoder) int {
	n := d.Uvarint("top")
	if n < 1 || n > MaxTop {
		d.Fail("top")
		return 0
	}
	return int(n)
}

// AppendReport appends r.
func AppendReport(b []byte, r *Report) []byte {
	b = binary.AppendUvarint(b, uint64(r.SpanMs))
	b = binary.AppendUvarint(b, uint64(r.SampleEvery))
	keys, size := r.Keys, 0
	for i, h := range keys {
		if size += len(h.Key) + 5*binary.MaxVarintLen64; size > MaxReportBytes {
			keys = keys[:i]
			break
		}
	}
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, h := range keys {
		b = wire.AppendString(b, h.Key)
		b = binary.AppendUvarint(b, h.Ops)
		b = binary.AppendUvarint(b, h.Low)
		b = binary.AppendUvarint(b, h.High)
		b = binary.AppendUvarint(b, h.Error)
	}
	return b
}

// ReadReport reads a report of at most top keys; the decoder's error says if it was
// malformed. PerSecond is computed again from Ops and SpanMs, as Top does.
func ReadReport(d *wire.Decoder, top int) Report {
	var r Report
	r.SpanMs = d.Int63("span")
	every := d.Uvarint("sample_every")
	if every > 1<<31 || d.Err() == nil && r.SpanMs < 1 {
		d.Fail("span or sample_every")
	}
	r.SampleEvery = uint32(every)
	n := d.Count("keys", 5, min(top, MaxTop))
	if n > 0 {
		r.Keys = make([]Hot, n)
	}
	for i := range r.Keys {
		key := d.Bytes("key")
		if len(key) > MaxKeyBytes {
			d.Fail("key")
		}
		h := &r.Keys[i]
		h.Key = string(key)
		h.Ops, h.Low, h.High, h.Error = d.Uvarint("ops"), d.Uvarint("low"), d.Uvarint("high"), d.Uvarint("error")
		if d.Err() != nil {
			return Report{}
		}
		h.PerSecond = float64(h.Ops) * 1000 / float64(r.SpanMs)
	}
	if d.Err() != nil {
		return Report{}
	}
	return r
}
