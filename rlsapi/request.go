package rlsapi

import (
	"errors"
	"fmt"
	"unicode/utf8"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/leapcount/leapcount/limits"
)

// request is a RateLimitRequest as the handler reads it: the fields it uses.
// decodeRequest reads one from the wire in a few allocations, where proto.Unmarshal
// made a message per descriptor, per entry and per string (BenchmarkDecodeRequest);
// fromProto takes one from the generated type (calls grpc.Server serves).
type request struct {
	domain      string
	descriptors []descriptor
	hitsAddend  uint32
	// room, when large enough, takes decodeRequest's entries, and descriptors' own
	// capacity its descriptors: a call's storage (rlsCall), not an allocation each.
	room []limits.Entry
}

// descriptor is a RateLimitDescriptor's fields the handler uses.
type descriptor struct {
	entries        []limits.Entry
	limit          override
	hasLimit       bool   // the limit override was sent
	hits           uint64 // hits_addend's value
	hitsSet        bool   // hits_addend was sent (0 then means: check only, count nothing)
	isNegativeHits bool

	first, end int // its entries' span in decodeRequest's array, while decoding
}

// override is a descriptor's limit override.
type override struct {
	requestsPerUnit uint32
	unit            int32
}

// errBadMessage is a request that is not a well-formed RateLimitRequest.
var errBadMessage = errors.New("cannot parse invalid wire-format data")

// errBadUTF8 is a string field that is not UTF-8, which proto3 refuses.
var errBadUTF8 = errors.New("string field contains invalid UTF-8")

// tooManyDescriptors is a request over Config.MaxDescriptors.
type tooManyDescriptors struct{ n, max int }

func (e *tooManyDescriptors) Error() string {
	return fmt.Sprintf("%d descriptors: at most %d", e.n, e.max)
}

// decodeRequest decodes msg as proto.Unmarshal would a RateLimitRequest: unknown
// fields and known ones of another wire type are skipped, a repeated singular field
// takes its last value (messages merge), strings must be UTF-8. Its strings share one
// copy of msg. A request of more than maxDescriptors is refused (tooManyDescriptors)
// before anything is allocated.
func decodeRequest(msg []byte, r *request, maxDescriptors int) error {
	d := wireReader{msg: msg}
	// Counted first, so that the descriptors and the entries take an allocation each.
	nd, ne := 0, 0
	if d.fields(0, len(msg), func(num protowire.Number, typ protowire.Type, _ uint64, at, n int) error {
		if num == 2 && typ == protowire.BytesType {
			nd++
			return d.fields(at, n, func(num protowire.Number, typ protowire.Type, _ uint64, _, _ int) error {
				if num == 1 && typ == protowire.BytesType {
					ne++
				}
				return nil
			})
		}
		return nil
	}) != nil {
		return errBadMessage
	}
	if nd > maxDescriptors {
		return &tooManyDescriptors{nd, maxDescriptors}
	}
	d.all = string(msg)
	r.descriptors = r.descriptors[:0]
	if cap(r.descriptors) < nd {
		r.descriptors = make([]descriptor, 0, nd)
	}
	entries := r.room[:0]
	if cap(entries) < ne {
		entries = make([]limits.Entry, 0, ne)
	}
	err := d.fields(0, len(msg), func(num protowire.Number, typ protowire.Type, v uint64, at, n int) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			s, err := d.str(at, n)
			r.domain = s
			return err
		case num == 2 && typ == protowire.BytesType:
			desc := descriptor{first: len(entries)}
			err := d.descriptor(at, n, &desc, &entries)
			desc.end = len(entries)
			r.descriptors = append(r.descriptors, desc)
			return err
		case num == 3 && typ == protowire.VarintType:
			r.hitsAddend = uint32(v)
		}
		return nil
	})
	for i := range r.descriptors {
		desc := &r.descriptors[i]
		desc.entries = entries[desc.first:desc.end:desc.end]
	}
	return err
}

// wireReader reads protobuf fields out of msg; all is msg as a string, so that the
// strings it yields are slices of one copy.
type wireReader struct {
	msg []byte
	all string
}

// fields calls f with each field of the message at all[at:at+n]: for a varint its
// value, for bytes where they are; other wire types are checked and skipped.
func (d *wireReader) fields(at, n int, f func(num protowire.Number, typ protowire.Type, v uint64, at, n int) error) error {
	b := d.msg[at : at+n]
	off := 0
	for off < len(b) {
		num, typ, l := protowire.ConsumeTag(b[off:])
		if l < 0 || !num.IsValid() {
			return errBadMessage
		}
		off += l
		var v uint64
		var start, size int
		switch typ {
		case protowire.VarintType:
			v, l = protowire.ConsumeVarint(b[off:])
		case protowire.BytesType:
			var p []byte
			p, l = protowire.ConsumeBytes(b[off:])
			start, size = at+off+l-len(p), len(p)
		default:
			l = protowire.ConsumeFieldValue(num, typ, b[off:])
		}
		if l < 0 {
			return errBadMessage
		}
		off += l
		if err := f(num, typ, v, start, size); err != nil {
			return err
		}
	}
	return nil
}

// str is the string field at all[at:at+n].
func (d *wireReader) str(at, n int) (string, error) {
	s := d.all[at : at+n]
	if !utf8.ValidString(s) {
		return "", errBadUTF8
	}
	return s, nil
}

// descriptor decodes a RateLimitDescriptor into desc, its entries onto entries.
func (d *wireReader) descriptor(at, n int, desc *descriptor, entries *[]limits.Entry) error {
	return d.fields(at, n, func(num protowire.Number, typ protowire.Type, v uint64, at, n int) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			var e limits.Entry
			err := d.entry(at, n, &e)
			*entries = append(*entries, e)
			return err
		case num == 2 && typ == protowire.BytesType:
			desc.hasLimit = true
			return d.override(at, n, &desc.limit)
		case num == 3 && typ == protowire.BytesType:
			desc.hitsSet = true // sent: its value, 0 unless it says (check only)
			return d.fields(at, n, func(num protowire.Number, typ protowire.Type, v uint64, _, _ int) error {
				if num == 1 && typ == protowire.VarintType {
					desc.hits = v // google.protobuf.UInt64Value
				}
				return nil
			})
		case num == 4 && typ == protowire.VarintType:
			desc.isNegativeHits = v != 0
		}
		return nil
	})
}

func (d *wireReader) entry(at, n int, e *limits.Entry) error {
	return d.fields(at, n, func(num protowire.Number, typ protowire.Type, _ uint64, at, n int) error {
		var err error
		switch {
		case num == 1 && typ == protowire.BytesType:
			e.Key, err = d.str(at, n)
		case num == 2 && typ == protowire.BytesType:
			e.Value, err = d.str(at, n)
		}
		return err
	})
}

// override decodes a RateLimitOverride; its unit_multiplier is read only to be
// checked, as proto.Unmarshal does, and not used (as by the decisions before).
func (d *wireReader) override(at, n int, o *override) error {
	return d.fields(at, n, func(num protowire.Number, typ protowire.Type, v uint64, at, n int) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			o.requestsPerUnit = uint32(v)
		case num == 2 && typ == protowire.VarintType:
			o.unit = int32(v)
		case num == 3 && typ == protowire.BytesType:
			return d.fields(at, n, func(protowire.Number, protowire.Type, uint64, int, int) error { return nil })
		}
		return nil
	})
}

// fromProto is the request of a decoded message.
func fromProto(pb *rlspb.RateLimitRequest) *request {
	r := &request{domain: pb.Domain, hitsAddend: pb.HitsAddend, descriptors: make([]descriptor, len(pb.Descriptors))}
	for i, d := range pb.Descriptors {
		desc := &r.descriptors[i]
		desc.entries = make([]limits.Entry, len(d.Entries))
		for j, e := range d.Entries {
			desc.entries[j] = limits.Entry{Key: e.GetKey(), Value: e.GetValue()}
		}
		if d.Limit != nil {
			desc.hasLimit = true
			desc.limit = override{requestsPerUnit: d.Limit.RequestsPerUnit, unit: int32(d.Limit.Unit)}
		}
		desc.hits, desc.hitsSet = d.GetHitsAddend().GetValue(), d.GetHitsAddend() != nil
		desc.isNegativeHits = d.IsNegativeHits
	}
	return r
}
