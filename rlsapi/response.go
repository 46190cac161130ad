package rlsapi

import (
	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// appendResponse appends resp's wire encoding to b, as proto.MarshalAppend would,
// without reflection for the fields answer sets (the overall code, the statuses and
// the response headers to add): proto's marshaling was the largest part of an answer's
// cost (BenchmarkAppendResponse). A response with any other field goes through proto.
func appendResponse(b []byte, resp *rlspb.RateLimitResponse) ([]byte, error) {
	if !answerOnly(resp) {
		return proto.MarshalOptions{}.MarshalAppend(b, resp)
	}
	if resp.OverallCode != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(resp.OverallCode))
	}
	for _, st := range resp.Statuses {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(statusSize(st)))
		b = appendStatus(b, st)
	}
	for _, h := range resp.ResponseHeadersToAdd {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(headerSize(h)))
		b = appendString(b, 1, h.Key)
		b = appendString(b, 2, h.Value)
	}
	return b, nil
}

// answerOnly reports whether resp holds nothing but what appendResponse encodes. It
// does not look for unknown fields: answer's responses are built, never decoded.
func answerOnly(resp *rlspb.RateLimitResponse) bool {
	if len(resp.RequestHeadersToAdd) > 0 || len(resp.RawBody) > 0 || resp.DynamicMetadata != nil || resp.Quota != nil {
		return false
	}
	for _, st := range resp.Statuses {
		if st == nil || st.Quota != nil || st.CurrentLimit != nil && st.CurrentLimit.UnitMultiplier != nil {
			return false
		}
	}
	for _, h := range resp.ResponseHeadersToAdd {
		if h == nil || len(h.RawValue) > 0 {
			return false
		}
	}
	return true
}

func appendStatus(b []byte, st *rlspb.RateLimitResponse_DescriptorStatus) []byte {
	b = appendVarintField(b, 1, uint64(st.Code))
	if l := st.CurrentLimit; l != nil {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(limitSize(l)))
		b = appendVarintField(b, 1, uint64(l.RequestsPerUnit))
		b = appendVarintField(b, 2, uint64(l.Unit))
		b = appendString(b, 3, l.Name)
	}
	b = appendVarintField(b, 3, uint64(st.LimitRemaining))
	if d := st.DurationUntilReset; d != nil {
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(durationSize(d)))
		b = appendVarintField(b, 1, uint64(d.Seconds))
		b = appendVarintField(b, 2, uint64(int64(d.Nanos)))
	}
	return b
}

func statusSize(st *rlspb.RateLimitResponse_DescriptorStatus) int {
	n := varintFieldSize(1, uint64(st.Code)) + varintFieldSize(3, uint64(st.LimitRemaining))
	if l := st.CurrentLimit; l != nil {
		n += messageFieldSize(2, limitSize(l))
	}
	if d := st.DurationUntilReset; d != nil {
		n += messageFieldSize(4, durationSize(d))
	}
	return n
}

func limitSize(l *rlspb.RateLimitResponse_RateLimit) int {
	return varintFieldSize(1, uint64(l.RequestsPerUnit)) + varintFieldSize(2, uint64(l.Unit)) + stringFieldSize(3, l.Name)
}

func durationSize(d *durationpb.Duration) int {
	return varintFieldSize(1, uint64(d.Seconds)) + varintFieldSize(2, uint64(int64(d.Nanos)))
}

func headerSize(h *corepb.HeaderValue) int {
	return stringFieldSize(1, h.Key) + stringFieldSize(2, h.Value)
}

// appendVarintField appends field num with value v, unless v is proto3's default (0).
func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// appendString appends string field num, unless it is empty (proto3's default).
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func varintFieldSize(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func stringFieldSize(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

func messageFieldSize(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}
