package rlsapi

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// randomResponse is a response of the kind answer builds: statuses with or without
// their parts, values at the edges of their types, and response headers.
func randomResponse(rng *rand.Rand) *rlspb.RateLimitResponse {
	pick := func(vs ...uint64) uint64 { return vs[rng.IntN(len(vs))] }
	resp := &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_Code(rng.IntN(3))}
	for range rng.IntN(5) {
		st := &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_Code(rng.IntN(3)),
			LimitRemaining: uint32(pick(0, 1, 127, 128, math.MaxUint32, rng.Uint64()))}
		if rng.IntN(4) > 0 {
			st.CurrentLimit = &rlspb.RateLimitResponse_RateLimit{Name: []string{"", "n", "a longer limit name"}[rng.IntN(3)],
				RequestsPerUnit: uint32(pick(0, 1, 300, math.MaxUint32)), Unit: rlspb.RateLimitResponse_RateLimit_Unit(rng.IntN(7))}
		}
		if rng.IntN(4) > 0 {
			st.DurationUntilReset = &durationpb.Duration{Seconds: int64(pick(0, 1, 59, 3600, math.MaxInt64, math.MaxUint64)),
				Nanos: int32(pick(0, 1, 999999999, math.MaxUint32))}
		}
		resp.Statuses = append(resp.Statuses, st)
	}
	if rng.IntN(3) == 0 {
		for i := range 3 {
			resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd,
				&corepb.HeaderValue{Key: "RateLimit-" + strconv.Itoa(i), Value: strconv.FormatUint(rng.Uint64(), 10)})
		}
	}
	return resp
}

// appendResponse writes what proto.Marshal writes, byte for byte, after a prefix.
func TestAppendResponseIsProtosEncoding(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	prefix := []byte{0, 1, 2, 3, 4}
	for i := range 5000 {
		resp := randomResponse(rng)
		want, err := proto.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendResponse(append([]byte(nil), prefix...), resp)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
			t.Fatalf("response %d (%v):\n got %x\nwant %x", i, resp, got[len(prefix):], want)
		}
	}
}

// A response with a field appendResponse does not write goes through proto whole.
func TestAppendResponseLeavesOtherFieldsToProto(t *testing.T) {
	for name, resp := range map[string]*rlspb.RateLimitResponse{
		"raw body":         {RawBody: []byte("x")},
		"request headers":  {RequestHeadersToAdd: []*corepb.HeaderValue{{Key: "k", Value: "v"}}},
		"dynamic metadata": {DynamicMetadata: &structpb.Struct{}},
		"quota":            {Quota: &rlspb.RateLimitResponse_Quota{Requests: 3}},
		"status quota":     {Statuses: []*rlspb.RateLimitResponse_DescriptorStatus{{Quota: &rlspb.RateLimitResponse_Quota{Requests: 1}}}},
		"unit multiplier": {Statuses: []*rlspb.RateLimitResponse_DescriptorStatus{{CurrentLimit: &rlspb.RateLimitResponse_RateLimit{
			UnitMultiplier: wrapperspb.UInt32(2)}}}},
		"raw header value": {ResponseHeadersToAdd: []*corepb.HeaderValue{{Key: "k", RawValue: []byte("v")}}},
	} {
		want, err := proto.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendResponse(nil, resp)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: got %x, %v; want %x", name, got, err, want)
		}
	}
}

// BenchmarkAppendResponse encodes a three-status answer with appendResponse and with
// proto.MarshalAppend, into a reused buffer.
func BenchmarkAppendResponse(b *testing.B) {
	resp := &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK}
	for i := range 3 {
		resp.Statuses = append(resp.Statuses, &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK,
			CurrentLimit:       &rlspb.RateLimitResponse_RateLimit{RequestsPerUnit: 1000000000, Unit: rlspb.RateLimitResponse_RateLimit_SECOND},
			LimitRemaining:     uint32(999999000 + i),
			DurationUntilReset: &durationpb.Duration{Seconds: 1}})
	}
	buf := make([]byte, 0, 512)
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = appendResponse(buf[:0], resp)
		}
	})
	b.Run("proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = proto.MarshalOptions{}.MarshalAppend(buf[:0], resp)
		}
	})
}
