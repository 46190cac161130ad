package rlsapi

import (
	"context"
	"fmt"
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/leapcount/leapcount/tools/rlsbench"
)

// BenchmarkShouldRateLimit is one ShouldRateLimit call over a loopback socket, with 1
// and 3 descriptors (distinct users, so every call counts in new counters as well as
// old), decided by an in-process store: the front end's own cost, gRPC included.
func BenchmarkShouldRateLimit(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("descriptors=%d", n), func(b *testing.B) {
			f := start(b, rlsbench.Config, nil) // limits never reached
			reqs := benchRequests(n)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := f.client.ShouldRateLimit(ctx, reqs[i%len(reqs)]); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}

// BenchmarkDecide is the handler alone, without gRPC: rules looked up, keys built,
// counters counted in an in-process store, the answer and its stats made.
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("descriptors=%d", n), func(b *testing.B) {
			f := start(b, rlsbench.Config, nil)
			reqs := benchRequests(n)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := f.srv.ShouldRateLimit(ctx, reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchRequests are 1024 requests of n descriptors each, distinct users.
func benchRequests(n int) []*rlspb.RateLimitRequest {
	keys := []string{"user", "path", "ip"}
	reqs := make([]*rlspb.RateLimitRequest, 1024)
	for i := range reqs {
		req := &rlspb.RateLimitRequest{Domain: "bench"}
		for j := 0; j < n; j++ {
			req.Descriptors = append(req.Descriptors, &commonpb.RateLimitDescriptor{
				Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: keys[j], Value: fmt.Sprintf("v%d", i)}}})
		}
		reqs[i] = req
	}
	return reqs
}
