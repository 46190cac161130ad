package hotkeys

import (
	"encoding/binary"

	"github.com/leapcount/leapcount/internal/wire"
)

// How a node asks a peer for its top keys (a message of its own kind, rpc.KindHotKeys,
// sent only to members that advertise it): the request is uvarint n (1 to MaxTop),
// then, only to a peer that advertises it, uvarint flags (FlagSliced); the answer is
// uvarint span_ms | uvarint sample_every | uvarint count (at most n) | keys, each
// string key | uvarint ops | uvarint low | uvarint high | uvarint error, and with
// FlagSliced asked, | byte sliced (0 or 1). A string is uvarint length | bytes, at most
// MaxKeyBytes. Every field is required: a frame that lacks one, or has bytes after the
// last, is malformed. An answer stops short of MaxReportBytes: the keys that would pass
// it are left out, the least counted first.

// Bounds of the wire: the most keys one asks for, and the longest key it carries.
const (
	MaxTop         = 1000
	MaxKeyBytes    = 1 << 20 // as long as a node takes (--max-key-bytes)
	MaxReportBytes = 4 << 20
	// MaxRequestBytes bounds a request's frame (its length prefix and type included).
	MaxRequestBytes = 64
)

// Request flags: what an answer carries beyond the first release's fields.
const (
	// FlagSliced asks for each key's Sliced. A release before it reads no flags.
	FlagSliced uint64 = 1 << 0

	knownFlags = FlagSliced
)

// AppendRequest appends a request for the top n keys, with flags when not 0.
func AppendRequest(b []byte, n int, flags uint64) []byte {
	b = binary.AppendUvarint(b, uint64(n))
	if flags != 0 {
		b = binary.AppendUvarint(b, flags)
	}
	return b
}

// ReadRequest reads a request: how many keys, and its flags (0 when it has none). The
// decoder's error says if it was malformed, as a flag this release does not know is.
func ReadRequest(d *wire.Decoder) (n int, flags uint64) {
	top := d.Uvarint("top")
	if top < 1 || top > MaxTop {
		d.Fail("top")
		return 0, 0
	}
	if d.Len() > 0 {
		if flags = d.Uvarint("flags"); flags&^knownFlags != 0 {
			d.Fail("flags")
			return 0, 0
		}
	}
	return int(top), flags
}

// AppendReport appends r as a request with flags asked for it.
func AppendReport(b []byte, r *Report, flags uint64) []byte {
	b = binary.AppendUvarint(b, uint64(r.SpanMs))
	b = binary.AppendUvarint(b, uint64(r.SampleEvery))
	keys, size := r.Keys, 0
	for i, h := range keys {
		if size += len(h.Key) + 5*binary.MaxVarintLen64 + 1; size > MaxReportBytes {
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
		if flags&FlagSliced != 0 {
			b = append(b, wire.Bool(h.Sliced))
		}
	}
	return b
}

// ReadReport reads a report of at most top keys, answering a request with flags; the
// decoder's error says if it was malformed. PerSecond is computed again from Ops and
// SpanMs, as Top does.
func ReadReport(d *wire.Decoder, top int, flags uint64) Report {
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
		if flags&FlagSliced != 0 {
			switch d.Byte("sliced") {
			case 0:
			case 1:
				h.Sliced = true
			default:
				d.Fail("sliced")
			}
		}
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
