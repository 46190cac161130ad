package h2grpc

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// asyncFixture serves Health/Check with an AsyncHandler: a call for service "later"
// is answered once release is closed, from a goroutine of its own, every other call
// before the handler returns; "panic" panics, "twice" replies twice.
func asyncFixture(t *testing.T) (*fixture, chan struct{}, chan struct{}) {
	entered, release := make(chan struct{}, 16), make(chan struct{})
	f := start(t, func(cfg *Config) {
		cfg.Async = map[string]AsyncHandler{checkMethod: func(ctx context.Context, c *Call, reply func([]byte, error)) {
			req := &healthpb.HealthCheckRequest{}
			if err := proto.Unmarshal(c.Message, req); err != nil {
				reply(nil, status.Error(codes.Internal, err.Error()))
				return
			}
			answer := func(st healthpb.HealthCheckResponse_ServingStatus) {
				reply(proto.MarshalOptions{}.MarshalAppend(c.Out, &healthpb.HealthCheckResponse{Status: st}))
			}
			switch req.Service {
			case "later":
				entered <- struct{}{}
				go func() { <-release; answer(healthpb.HealthCheckResponse_NOT_SERVING) }()
			case "panic":
				panic("boom")
			case "twice":
				answer(healthpb.HealthCheckResponse_SERVING)
				// c.Out is no longer its own once it replied: the second answer in
				// memory of its own.
				reply(proto.MarshalOptions{}.MarshalAppend(make([]byte, 5), &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}))
			default:
				answer(healthpb.HealthCheckResponse_SERVING)
			}
		}}
	})
	return f, entered, release
}

// A call whose AsyncHandler replies later leaves the connection's reader free: calls
// after it on the same connection are answered meanwhile, and it is answered once its
// handler replies. A graceful stop waits for it.
func TestAsyncHandlerRepliesLaterWithoutHoldingTheReader(t *testing.T) {
	f, entered, release := asyncFixture(t)
	cl := f.dial(t)
	later := make(chan *healthpb.HealthCheckResponse, 1)
	go func() {
		resp, err := cl.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "later"})
		if err != nil {
			t.Errorf("the later call: %v", err)
		}
		later <- resp
	}()
	<-entered
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cl.Check(ctx, &healthpb.HealthCheckRequest{Service: "now"})
		cancel()
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("call %d while another waits for its reply: %v, %v; want SERVING", i, resp, err)
		}
	}
	stopped := stopWhileACallRuns(t, f)
	close(release)
	if resp := <-later; resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("the later call: %v; want its handler's NOT_SERVING", resp)
	}
	<-stopped
}

// An AsyncHandler that panics answers INTERNAL and the connection goes on; one that
// replies twice is answered by its first reply.
func TestAsyncHandlerPanicsAndSecondRepliesAreContained(t *testing.T) {
	f, _, _ := asyncFixture(t)
	cl := f.dial(t)
	if _, err := cl.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "panic"}); status.Code(err) != codes.Internal {
		t.Fatalf("a panicking handler: %v; want Internal", err)
	}
	for i := 0; i < 5; i++ {
		resp, err := cl.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "twice"})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("a handler that replies twice: %v, %v; want its first reply, SERVING", resp, err)
		}
	}
}
