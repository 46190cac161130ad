package loadgen

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// oneByte makes the reader refill between every byte, so each reply crosses a refill.
func readAll(t *testing.T, stream string, read func(*reader) error, n int) []error {
	t.Helper()
	b := newReader(iotest.OneByteReader(strings.NewReader(stream)), 4)
	var out []error
	for range n {
		out = append(out, read(b))
	}
	if err := read(b); !errors.Is(err, io.EOF) {
		t.Fatalf("after %d replies: %v, want EOF", n, err)
	}
	return out
}

func TestReadRESP(t *testing.T) {
	stream := ":42\r\n+OK\r\n$5\r\nhello\r\n$-1\r\n*4\r\n:1\r\n:2\r\n:3\r\n:0\r\n-ERR counter table full\r\n" +
		"*2\r\n*1\r\n$3\r\nabc\r\n-ERR inner\r\n*-1\r\n$0\r\n\r\n"
	errs := readAll(t, stream, readRESP, 9)
	for i, err := range errs {
		var er *errReply
		switch i {
		case 5:
			if !errors.As(err, &er) || er.msg != "ERR counter table full" {
				t.Fatalf("reply %d: %v, want the error reply", i, err)
			}
		case 6:
			if !errors.As(err, &er) || er.msg != "ERR inner" {
				t.Fatalf("reply %d: %v, want the inner error", i, err)
			}
		default:
			if err != nil {
				t.Fatalf("reply %d: %v", i, err)
			}
		}
	}
}

func TestReadRESPBroken(t *testing.T) {
	for _, s := range []string{"?x\r\n", "$abc\r\n", "*-2\r\n", "\r\n"} {
		b := newReader(strings.NewReader(s), 16)
		err := readRESP(b)
		var er *errReply
		if err == nil || errors.As(err, &er) {
			t.Fatalf("%q: %v, want a broken-stream error", s, err)
		}
	}
}

func TestReadHTTP(t *testing.T) {
	ok := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 15\r\n\r\n{\"count\":12}\r\n\n"
	bad := "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\n\r\n{}"
	errs := readAll(t, ok+bad+ok, readHTTP, 3)
	var er *errReply
	if errs[0] != nil || errs[2] != nil || !errors.As(errs[1], &er) || er.msg != "503 Service Unavailable" {
		t.Fatalf("errors %v", errs)
	}
}

func TestReadHTTPUnsupported(t *testing.T) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\n\r\n",
		"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
	} {
		if err := readHTTP(newReader(strings.NewReader(s), 64)); err == nil {
			t.Fatalf("%q read as a response", s)
		}
	}
}

// A line longer than the buffer grows it.
func TestReaderLongLine(t *testing.T) {
	long := strings.Repeat("x", 1000)
	b := newReader(strings.NewReader("+"+long+"\r\n"), 8)
	l, err := b.line()
	if err != nil || string(l) != "+"+long {
		t.Fatalf("line %d bytes, %v", len(l), err)
	}
}
