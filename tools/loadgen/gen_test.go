package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeRESP answers every command with :1, or an error for a key starting with "bad";
// it counts the commands and remembers the keys (the second argument).
type fakeRESP struct {
	ln       net.Listener
	commands atomic.Int64
	mu       sync.Mutex
	keys     map[string]int
}

func startFakeRESP(t *testing.T) *fakeRESP {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRESP{ln: ln, keys: map[string]int{}}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeRESP) serve(c net.Conn) {
	defer c.Close()
	br, bw := bufio.NewReader(c), bufio.NewWriter(c)
	for {
		args, err := readCommand(br)
		if err != nil {
			return
		}
		f.commands.Add(1)
		f.mu.Lock()
		f.keys[args[1]]++
		f.mu.Unlock()
		if strings.HasPrefix(args[1], "bad") {
			bw.WriteString("-ERR bad key\r\n")
		} else {
			bw.WriteString(":1\r\n")
		}
		if br.Buffered() == 0 {
			bw.Flush()
		}
	}
}

func readCommand(br *bufio.Reader) ([]string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	args := make([]string, n)
	for i := range args {
		if line, err = br.ReadString('\n'); err != nil {
			return nil, err
		}
		l, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		b := make([]byte, l+2)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:l])
	}
	return args, nil
}

// A counted run sends each key of its range exactly once, pipelined over several
// connections, and counts every reply.
func TestCountedRun(t *testing.T) {
	f := startFakeRESP(t)
	res, err := Run(context.Background(), Config{
		Addr: f.ln.Addr().String(), Conns: 3, Pipeline: 16,
		Request: Command(Str("SW.INCR"), Key, Str("60s")), Keys: Range{Prefix: "m:", N: 1000},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 1000 || res.Errors != 0 || res.Latency.Count() != 1000 || f.commands.Load() != 1000 {
		t.Fatalf("ops %d errors %d latencies %d; server saw %d", res.Ops, res.Errors, res.Latency.Count(), f.commands.Load())
	}
	for i := range 1000 {
		if n := f.keys[fmt.Sprintf("m:%d", i)]; n != 1 {
			t.Fatalf("key m:%d sent %d times", i, n)
		}
	}
}

// A request of two commands gets two replies and counts once.
func TestRepliesPerRequest(t *testing.T) {
	f := startFakeRESP(t)
	set, expire := Command(Str("SET"), Key, Str("1")), Command(Str("PEXPIRE"), Key, Str("60000"))
	res, err := Run(context.Background(), Config{
		Addr: f.ln.Addr().String(), Conns: 2, Pipeline: 8, Replies: 2, Keys: Range{Prefix: "m:", N: 100},
		Request: func(buf, key []byte, now int64, seq uint64) []byte {
			return expire(set(buf, key, now, seq), key, now, seq)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 100 || res.Errors != 0 || f.commands.Load() != 200 || f.keys["m:7"] != 2 {
		t.Fatalf("ops %d errors %d; server saw %d commands, m:7 %d times", res.Ops, res.Errors, f.commands.Load(), f.keys["m:7"])
	}
}

// Error replies are counted apart and the first is kept; the run goes on.
func TestErrorReplies(t *testing.T) {
	f := startFakeRESP(t)
	res, err := Run(context.Background(), Config{
		Addr: f.ln.Addr().String(), Conns: 2, Pipeline: 4,
		Request: Command(Str("GET"), Key), Keys: Range{Prefix: "bad", N: 10},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 0 || res.Errors != 10 || res.FirstError != "ERR bad key" {
		t.Fatalf("ops %d errors %d first %q", res.Ops, res.Errors, res.FirstError)
	}
}

// A timed run calls its window hooks in order and counts only replies inside the
// window (no assertion on how many: that depends on the machine).
func TestTimedRunWindow(t *testing.T) {
	f := startFakeRESP(t)
	var calls []bool
	res, err := Run(context.Background(), Config{
		Addr: f.ln.Addr().String(), Conns: 2, Pipeline: 2,
		Request: Command(Str("INCR"), Key), Keys: Uniform{Prefix: "k:", N: 10},
		Warmup: 20 * time.Millisecond, Duration: 50 * time.Millisecond,
		Window: func(start bool) { calls = append(calls, start) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || !calls[0] || calls[1] {
		t.Fatalf("hooks called %v, want [true false]", calls)
	}
	if res.Elapsed != 50*time.Millisecond || uint64(res.Ops) != res.Latency.Count() || res.Ops > f.commands.Load() {
		t.Fatalf("elapsed %v ops %d latencies %d; server saw %d", res.Elapsed, res.Ops, res.Latency.Count(), f.commands.Load())
	}
}

// HTTP requests reach a Go server as JSON bodies; a status other than 200 is an error reply.
func TestHTTPRun(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/incr" || !strings.HasPrefix(string(body), `{"key":"h:`) {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		got.Add(1)
		w.Write([]byte(`{"count":1}`))
	}))
	defer srv.Close()
	res, err := Run(context.Background(), Config{
		Addr: strings.TrimPrefix(srv.URL, "http://"), Proto: HTTP, Conns: 4,
		Request: HTTPPost("/v1/incr", `{"key":"`, `","window":"60s"}`), Keys: Range{Prefix: "h:", N: 200},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 200 || res.Errors != 0 || got.Load() != 200 {
		t.Fatalf("ops %d errors %d; server counted %d", res.Ops, res.Errors, got.Load())
	}
}

// Cancelling the context ends a run that would go on, with the context's error.
func TestCancel(t *testing.T) {
	f := startFakeRESP(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	_, err := Run(ctx, Config{
		Addr: f.ln.Addr().String(), Request: Command(Str("INCR"), Key), Keys: Uniform{Prefix: "k:", N: 10},
		Duration: time.Hour,
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

// A server that goes away breaks the run with an error, rather than hanging it.
func TestBrokenConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, err = Run(context.Background(), Config{
		Addr: ln.Addr().String(), Request: Command(Str("INCR"), Key), Keys: Uniform{Prefix: "k:", N: 10},
		Duration: time.Hour,
	})
	if !errors.Is(err, errBroken) {
		t.Fatalf("err %v, want a broken connection", err)
	}
}

// Addrs spreads a run's connections over several servers, each getting its share.
func TestAddrsSpreadsConnections(t *testing.T) {
	a, b := startFakeRESP(t), startFakeRESP(t)
	res, err := Run(context.Background(), Config{
		Addrs: []string{a.ln.Addr().String(), b.ln.Addr().String()}, Conns: 2,
		Request: Command(Str("SW.INCR"), Key, Str("60s")), Keys: Range{Prefix: "s:", N: 200},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 200 || a.commands.Load() == 0 || b.commands.Load() == 0 || a.commands.Load()+b.commands.Load() != 200 {
		t.Fatalf("ops %d; the servers saw %d and %d; want 200 between both", res.Ops, a.commands.Load(), b.commands.Load())
	}
}
