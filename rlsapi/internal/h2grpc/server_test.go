package h2grpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/leapcount/leapcount/internal/testkit/wait"
)

const checkMethod = "/grpc.health.v1.Health/Check"

// fixture serves Health/Check on the package's own call path (answered by check) and
// everything else (Health/Watch, reflection) by a grpc.Server as Others.
type fixture struct {
	srv    *Server
	addr   string
	health *health.Server
	check  func(ctx context.Context, req *healthpb.HealthCheckRequest, c *Call) (*healthpb.HealthCheckResponse, error)
	calls  atomic.Int64 // handler calls in flight
	peak   atomic.Int64
}

func start(t *testing.T, tune func(*Config)) *fixture {
	t.Helper()
	f := &fixture{health: health.NewServer()}
	f.check = func(ctx context.Context, req *healthpb.HealthCheckRequest, c *Call) (*healthpb.HealthCheckResponse, error) {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, f.health)
	reflection.Register(gs)
	cfg := Config{Others: gs, Unary: map[string]UnaryHandler{checkMethod: func(ctx context.Context, c *Call) ([]byte, error) {
		n := f.calls.Add(1)
		defer f.calls.Add(-1)
		for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
		}
		req := &healthpb.HealthCheckRequest{}
		if err := proto.Unmarshal(c.Message, req); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		resp, err := f.check(ctx, req, c)
		if err != nil {
			return nil, err
		}
		return proto.MarshalOptions{}.MarshalAppend(c.Out, resp)
	}}}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if tune != nil {
		tune(&cfg)
	}
	f.srv = New(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- f.srv.Serve(ln) }()
	t.Cleanup(func() {
		f.srv.Stop()
		if err := <-served; !errors.Is(err, ErrServerStopped) {
			t.Errorf("Serve returned %v; want ErrServerStopped", err)
		}
		gs.Stop()
	})
	return f
}

func (f *fixture) dial(t *testing.T, opts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient(f.addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func TestUnaryCallsAreAnsweredOnTheOwnPath(t *testing.T) {
	f := start(t, nil)
	var seen atomic.Value
	f.check = func(ctx context.Context, req *healthpb.HealthCheckRequest, c *Call) (*healthpb.HealthCheckResponse, error) {
		seen.Store(c.Method + " " + c.Authorization + " " + req.Service)
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
	}
	cl := f.dial(t, grpc.WithPerRPCCredentials(bearer("s3cret")))
	for i := 0; i < 50; i++ {
		resp, err := cl.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "svc"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("status %v; want the handler's NOT_SERVING", resp.Status)
		}
	}
	if got, want := seen.Load(), checkMethod+" Bearer s3cret svc"; got != want {
		t.Fatalf("handler saw %q; want %q", got, want)
	}
}

func TestHandlerErrorsAreTheCallsStatus(t *testing.T) {
	f := start(t, nil)
	msg := "no such thing: 100% gone, naïve"
	f.check = func(context.Context, *healthpb.HealthCheckRequest, *Call) (*healthpb.HealthCheckResponse, error) {
		return nil, status.Error(codes.NotFound, msg)
	}
	_, err := f.dial(t).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if s := status.Convert(err); s.Code() != codes.NotFound || s.Message() != msg {
		t.Fatalf("got %v %q; want NotFound %q", s.Code(), s.Message(), msg)
	}
}

func TestPanickingHandlerAnswersInternal(t *testing.T) {
	f := start(t, nil)
	f.check = func(context.Context, *healthpb.HealthCheckRequest, *Call) (*healthpb.HealthCheckResponse, error) {
		panic("boom")
	}
	cl := f.dial(t)
	_, err := cl.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Internal {
		t.Fatalf("got %v; want Internal", err)
	}
}

func TestTimeoutIsTheHandlersDeadline(t *testing.T) {
	f := start(t, nil)
	f.check = func(ctx context.Context, _ *healthpb.HealthCheckRequest, _ *Call) (*healthpb.HealthCheckResponse, error) {
		dl, ok := ctx.Deadline()
		if !ok || time.Until(dl) > 3*time.Second {
			return nil, status.Errorf(codes.FailedPrecondition, "deadline %v %v; want within 3s", dl, ok)
		}
		<-ctx.Done()
		return nil, status.Error(codes.DeadlineExceeded, "handler saw its deadline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := f.dial(t).Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("got %v; want DeadlineExceeded", err)
	}
}

func TestCancelledCallCancelsItsHandler(t *testing.T) {
	f := start(t, nil)
	entered, left := make(chan struct{}), make(chan error, 1)
	f.check = func(ctx context.Context, _ *healthpb.HealthCheckRequest, _ *Call) (*healthpb.HealthCheckResponse, error) {
		close(entered)
		select {
		case <-ctx.Done():
			left <- ctx.Err()
		case <-time.After(10 * time.Second):
			left <- errors.New("not cancelled within 10s")
		}
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-entered; cancel() }()
	if _, err := f.dial(t).Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Canceled {
		t.Fatalf("got %v; want Canceled", err)
	}
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("handler: %v", err)
	}
}

func TestOversizedRequestIsRefused(t *testing.T) {
	f := start(t, func(c *Config) { c.MaxRecvMsgSize = 1000 })
	cl := f.dial(t)
	_, err := cl.Check(context.Background(), &healthpb.HealthCheckRequest{Service: strings.Repeat("x", 5000)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("got %v; want ResourceExhausted", err)
	}
	if _, err := cl.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "small"}); err != nil {
		t.Fatalf("a call after it: %v", err)
	}
}

func TestHeaderListOverTheCapIsRefused(t *testing.T) {
	f := start(t, func(c *Config) { c.MaxHeaderBytes = 2048 })
	cl := f.dial(t)
	ctx := metadataCtx("x-big", strings.Repeat("y", 4096))
	_, err := cl.Check(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		t.Fatal("a call with 4 KiB of metadata got through a 2 KiB cap")
	}
	if _, err := cl.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("a call after it: %v", err)
	}
}

// The answer is larger than the client's windows (64 KiB): it goes out as the client
// gives window back.
func TestLargeAnswerWaitsForTheClientsWindow(t *testing.T) {
	f := start(t, nil)
	big := strings.Repeat("z", 300<<10)
	f.check = func(context.Context, *healthpb.HealthCheckRequest, *Call) (*healthpb.HealthCheckResponse, error) {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
	}
	// HealthCheckResponse has no string field: answer raw bytes of a message that
	// decodes as one (an unknown field 15 holding big).
	f.srv.cfg.Unary[checkMethod] = func(ctx context.Context, c *Call) ([]byte, error) {
		out := append(c.Out, 0x7a) // field 15, wire type 2
		out = appendVarint(out, uint64(len(big)))
		return append(out, big...), nil
	}
	cl := f.dial(t, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<20)))
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := cl.Check(context.Background(), &healthpb.HealthCheckRequest{})
			if err != nil {
				t.Error(err)
				return
			}
			if n := len(resp.ProtoReflect().GetUnknown()); n < len(big) {
				t.Errorf("answer carried %d bytes; want %d", n, len(big))
			}
		}()
	}
	wg.Wait()
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func TestStreamsPerConnectionAreCapped(t *testing.T) {
	f := start(t, func(c *Config) { c.MaxStreams = 4 })
	release := make(chan struct{})
	f.check = func(ctx context.Context, _ *healthpb.HealthCheckRequest, _ *Call) (*healthpb.HealthCheckResponse, error) {
		<-release
		return &healthpb.HealthCheckResponse{}, nil
	}
	cl := f.dial(t)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cl.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wait.ForTrue(t, 10*time.Second, func() bool { return f.calls.Load() == 4 })
	close(release)
	wg.Wait()
	if p := f.peak.Load(); p > 4 {
		t.Fatalf("%d calls ran at once on one connection; the cap is 4", p)
	}
}

func TestOtherCallsGoToOthers(t *testing.T) {
	f := start(t, nil)
	f.health.SetServingStatus("svc", healthpb.HealthCheckResponse_NOT_SERVING)
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A server-streaming call: updates as the status changes.
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("first update %v, %v; want NOT_SERVING", r, err)
	}
	f.health.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("second update %v, %v; want SERVING", r, err)
	}
	// A bidirectional one, with an answer larger than a window: reflection.
	rs, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := rs.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
			t.Fatal(err)
		}
		r, err := rs.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if got := r.GetListServicesResponse().GetService(); len(got) != 3 {
			t.Fatalf("services %v; want health and reflection's two", got)
		}
	}
	rs.CloseSend()
	// An unknown method is Others' to refuse.
	err = conn.Invoke(ctx, "/no.Such/Method", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("unknown method: %v; want Unimplemented", err)
	}
}

// stopWhileACallRuns starts a graceful stop of f, which has a call in flight, and
// checks that it has not returned 100 ms later; the channel closes when it returns.
func stopWhileACallRuns(t *testing.T, f *fixture) chan struct{} {
	t.Helper()
	stopped := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		f.srv.GracefulStop(ctx)
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with a call in flight")
	case <-time.After(100 * time.Millisecond): // a span in which it must not return
	}
	return stopped
}

func TestGracefulStopLetsCallsInFlightEnd(t *testing.T) {
	f := start(t, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	f.check = func(ctx context.Context, _ *healthpb.HealthCheckRequest, _ *Call) (*healthpb.HealthCheckResponse, error) {
		close(entered)
		<-release
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
	}
	cl := f.dial(t)
	done := make(chan error, 1)
	go func() {
		_, err := cl.Check(context.Background(), &healthpb.HealthCheckRequest{})
		done <- err
	}()
	<-entered
	stopped := stopWhileACallRuns(t, f)
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	<-stopped
}

func TestBadClientsCostNothing(t *testing.T) {
	f := start(t, func(c *Config) { c.Handshake = 300 * time.Millisecond })
	for name, send := range map[string][]byte{
		"not http2":        []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"preface only":     []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
		"junk after":       append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), bytes.Repeat([]byte{0xff}, 64)...),
		"headers first":    append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), appendFrame(nil, 1, 4, 1, []byte{0x88})...),
		"huge frame":       append(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), appendFrame(nil, 4, 0, 0, nil)...), 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1),
		"even stream":      append(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), appendFrame(nil, 4, 0, 0, nil)...), appendFrame(nil, 1, 5, 2, []byte{0x83, 0x84})...),
		"data on idle":     append(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), appendFrame(nil, 4, 0, 0, nil)...), appendFrame(nil, 0, 1, 9, []byte{1, 2})...),
		"bad hpack":        append(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), appendFrame(nil, 4, 0, 0, nil)...), appendFrame(nil, 1, 5, 1, []byte{0xff, 0xff, 0xff, 0xff})...),
		"nothing at all":   nil,
		"zero window step": append(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), appendFrame(nil, 4, 0, 0, nil)...), appendFrame(nil, 8, 0, 0, []byte{0, 0, 0, 0})...),
	} {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", f.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write(send)
			closedWithin(t, c, 5*time.Second, "the connection of a bad client")
		})
	}
	if _, err := f.dial(t).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("a good client after the bad ones: %v", err)
	}
}

func TestIdleConnectionIsClosed(t *testing.T) {
	f := start(t, func(c *Config) { c.IdleTimeout = 200 * time.Millisecond })
	if _, err := f.dial(t).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	wait.ForTrue(t, 10*time.Second, func() bool {
		f.srv.mu.Lock()
		defer f.srv.mu.Unlock()
		return len(f.srv.conns) == 0
	})
}
