package rlsapi

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
)

// curl speaks HTTP/2 with nghttp2, the HTTP/2 library Envoy long used: a gRPC call
// it makes by hand (prior knowledge, a framed message, te: trailers) gets the answer
// and the trailers a gRPC client expects, on the call path of our own.
func TestNghttp2ClientIsAnswered(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is needed (Debian's curl, built with nghttp2):", err)
	}
	f := start(t, fixedConfig, nil)
	dir := t.TempDir()
	call := func(req *rlspb.RateLimitRequest) (hdr string, body []byte) {
		t.Helper()
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		in := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b)))
		if err := os.WriteFile(filepath.Join(dir, "req"), append(in, b...), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(curl, "-sS", "--http2-prior-knowledge", "-X", "POST", "-H", "content-type: application/grpc",
			"-H", "te: trailers", "--data-binary", "@"+filepath.Join(dir, "req"), "-D", filepath.Join(dir, "hdr"), "-o", filepath.Join(dir, "body"),
			"http://"+f.conn.Target()+shouldRateLimitMethod).CombinedOutput()
		if err != nil {
			t.Fatalf("curl: %v: %s", err, out)
		}
		h, _ := os.ReadFile(filepath.Join(dir, "hdr"))
		body, _ = os.ReadFile(filepath.Join(dir, "body"))
		return string(h), body
	}
	for want := uint32(19); want >= 18; want-- {
		hdr, body := call(&rlspb.RateLimitRequest{Domain: "test-domain", Descriptors: []*commonpb.RateLimitDescriptor{desc("key2", "v")}})
		if !strings.Contains(hdr, "HTTP/2 200") || !strings.Contains(hdr, "grpc-status: 0") {
			t.Fatalf("headers and trailers:\n%s\nwant HTTP/2 200 and grpc-status: 0", hdr)
		}
		if len(body) < 5 || body[0] != 0 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
			t.Fatalf("body %x is not one gRPC message", body)
		}
		resp := &rlspb.RateLimitResponse{}
		if err := proto.Unmarshal(body[5:], resp); err != nil {
			t.Fatal(err)
		}
		if got := resp.Statuses[0].LimitRemaining; resp.OverallCode != rlspb.RateLimitResponse_OK || got != want {
			t.Fatalf("answer %v; want OK with %d remaining", resp, want)
		}
	}
	hdr, body := call(&rlspb.RateLimitRequest{Domain: ""})
	if !strings.Contains(hdr, "grpc-status: 3") || len(body) != 0 {
		t.Fatalf("a request without a domain got\n%s%x\nwant grpc-status: 3 (INVALID_ARGUMENT) and no message", hdr, body)
	}
}
