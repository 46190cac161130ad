package rlsapi

import (
	"errors"
	"reflect"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// requestSeeds are encoded requests that use every field decodeRequest reads, and some
// it must skip.
func requestSeeds(t testing.TB) [][]byte {
	reqs := []*rlspb.RateLimitRequest{
		{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "user", Value: "u1"}}}}},
		{Domain: "envoy", HitsAddend: 7, Descriptors: []*commonpb.RateLimitDescriptor{
			{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "a", Value: "1"}, {Key: "b", Value: "ü"}},
				Limit:      &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typev3.RateLimitUnit_MINUTE, UnitMultiplier: wrapperspb.UInt32(3)},
				HitsAddend: wrapperspb.UInt64(1 << 40)},
			{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "c"}}, IsNegativeHits: true},
			{},
		}},
		{Domain: "x", Descriptors: []*commonpb.RateLimitDescriptor{{Limit: &commonpb.RateLimitDescriptor_RateLimitOverride{Unit: -3}}}},
	}
	var out [][]byte
	for _, r := range reqs {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	// Unknown fields of every wire type, a known field of another wire type, a field
	// sent twice, an unknown group, and a string that is not UTF-8.
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 9)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, "first")
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, "second")
	b = protowire.AppendTag(b, 9, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 1)
	b = protowire.AppendTag(b, 10, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, 1)
	b = protowire.AppendTag(b, 11, protowire.StartGroupType)
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	b = protowire.AppendTag(b, 11, protowire.EndGroupType)
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendString(b, "hits_addend of the wrong type")
	out = append(out, b)
	bad := protowire.AppendTag(nil, 1, protowire.BytesType)
	out = append(out, protowire.AppendString(bad, "\xff"))
	out = append(out, []byte{0x12, 0x05, 0x0a, 0x03, 0x12, 0x01}) // a descriptor cut short
	// Requests nobody here wrote: the header of a real response, and a response.
	resp, _ := proto.Marshal(&rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OVER_LIMIT,
		ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: "k", Value: "v"}}})
	return append(out, resp)
}

// decodeRequest reads what proto.Unmarshal and fromProto read, and refuses what
// proto.Unmarshal refuses.
func FuzzDecodeRequest(f *testing.F) {
	for _, b := range requestSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var pb rlspb.RateLimitRequest
		want := proto.Unmarshal(b, &pb)
		var got request
		err := decodeRequest(b, &got, len(b))
		if (err == nil) != (want == nil) {
			t.Fatalf("%x: decodeRequest: %v; proto.Unmarshal: %v", b, err, want)
		}
		if err != nil {
			return
		}
		if wantReq := fromProto(&pb); !sameRequest(&got, wantReq) {
			t.Fatalf("%x: decoded %+v; proto.Unmarshal's %+v", b, got, *wantReq)
		}
	})
}

// sameRequest compares what the handler reads of two requests.
func sameRequest(a, b *request) bool {
	if a.domain != b.domain || a.hitsAddend != b.hitsAddend || len(a.descriptors) != len(b.descriptors) {
		return false
	}
	for i := range a.descriptors {
		x, y := a.descriptors[i], b.descriptors[i]
		if len(x.entries) == 0 && len(y.entries) == 0 {
			x.entries, y.entries = nil, nil
		}
		x.first, x.end, y.first, y.end = 0, 0, 0, 0
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// BenchmarkDecodeRequest is a request of 3 descriptors read as the handler reads it:
// decodeRequest against proto.Unmarshal and fromProto.
func BenchmarkDecodeRequest(b *testing.B) {
	msg, err := proto.Marshal(benchRequests(3)[0])
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decodeRequest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r request
			if err := decodeRequest(msg, &r, 64); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proto.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var pb rlspb.RateLimitRequest
			if err := proto.Unmarshal(msg, &pb); err != nil {
				b.Fatal(err)
			}
			_ = fromProto(&pb)
		}
	})
}

// A request of too many descriptors is refused before anything is allocated for it:
// proto.Unmarshal made every descriptor first.
func TestTooManyDescriptorsCostNothing(t *testing.T) {
	var msg []byte
	for range 30_000 { // 60 KB of empty descriptors
		msg = protowire.AppendTag(msg, 2, protowire.BytesType)
		msg = protowire.AppendBytes(msg, nil)
	}
	var err error
	allocs := testing.AllocsPerRun(10, func() {
		var r request
		err = decodeRequest(msg, &r, 64)
	})
	var many *tooManyDescriptors
	if !errors.As(err, &many) || many.n != 30_000 {
		t.Fatalf("got %v; want 30000 descriptors refused", err)
	}
	if allocs > 1 {
		t.Fatalf("%v allocations to refuse it; want at most the error's", allocs)
	}
}
