package loadgen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// reader is a buffered reader that hands out lines and skips bytes in place: the
// reply parsers need no more, and unlike bufio.Reader.ReadSlice it grows for a line
// longer than its buffer.
type reader struct {
	rd   io.Reader
	buf  []byte
	r, w int
}

func newReader(rd io.Reader, size int) *reader { return &reader{rd: rd, buf: make([]byte, size)} }

// fill reads more bytes, first moving what is unread to the front (or growing the
// buffer when it is full of one unread line).
func (b *reader) fill() error {
	if b.r > 0 {
		b.w = copy(b.buf, b.buf[b.r:b.w])
		b.r = 0
	}
	if b.w == len(b.buf) {
		b.buf = append(b.buf, make([]byte, len(b.buf))...)
	}
	n, err := b.rd.Read(b.buf[b.w:])
	b.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// line returns the next line without its \r\n, valid until the next call.
func (b *reader) line() ([]byte, error) {
	for {
		if i := bytes.Index(b.buf[b.r:b.w], crlf); i >= 0 {
			l := b.buf[b.r : b.r+i]
			b.r += i + 2
			return l, nil
		}
		if err := b.fill(); err != nil {
			return nil, err
		}
	}
}

// skip discards n bytes.
func (b *reader) skip(n int) error {
	for n > 0 {
		if b.r == b.w {
			if err := b.fill(); err != nil {
				return err
			}
		}
		k := min(n, b.w-b.r)
		b.r += k
		n -= k
	}
	return nil
}

var crlf = []byte("\r\n")

// errReply is a reply that says the request failed: a RESP error, an HTTP status
// other than 200. The connection stays usable.
type errReply struct{ msg string }

func (e *errReply) Error() string { return e.msg }

// readRESP reads one RESP2 reply (nested arrays included). It returns an *errReply for
// an error reply, any other error when the stream is broken.
func readRESP(b *reader) error {
	l, err := b.line()
	if err != nil {
		return err
	}
	if len(l) == 0 {
		return errors.New("resp: empty line")
	}
	switch l[0] {
	case '+', ':':
		return nil
	case '-':
		return &errReply{msg: string(l[1:])}
	case '$':
		n, err := strconv.Atoi(string(l[1:]))
		if err != nil || n < -1 {
			return fmt.Errorf("resp: bad bulk length %q", l)
		}
		if n < 0 {
			return nil
		}
		return b.skip(n + 2)
	case '*':
		n, err := strconv.Atoi(string(l[1:]))
		if err != nil || n < -1 {
			return fmt.Errorf("resp: bad array length %q", l)
		}
		var first error // an error element fails the reply; read the rest anyway
		for range n {
			if err := readRESP(b); err != nil {
				var er *errReply
				if !errors.As(err, &er) {
					return err
				}
				first = firstErr(first, err)
			}
		}
		return first
	}
	return fmt.Errorf("resp: unexpected reply %q", l)
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// readHTTP reads one HTTP/1.1 response with a Content-Length body (what a Go server
// sends for a small body). A status other than 200 is an *errReply.
func readHTTP(b *reader) error {
	status, err := b.line()
	if err != nil {
		return err
	}
	if len(status) < 12 || !bytes.HasPrefix(status, []byte("HTTP/1.1 ")) {
		return fmt.Errorf("http: bad status line %q", status)
	}
	var failed error
	if string(status[9:12]) != "200" {
		failed = &errReply{msg: string(status[9:])}
	}
	length := -1
	for {
		h, err := b.line()
		if err != nil {
			return err
		}
		if len(h) == 0 {
			break
		}
		if v, ok := headerValue(h, "content-length"); ok {
			if length, err = strconv.Atoi(string(v)); err != nil || length < 0 {
				return fmt.Errorf("http: bad Content-Length %q", h)
			}
		} else if _, ok := headerValue(h, "transfer-encoding"); ok {
			return fmt.Errorf("http: %q is not supported", h)
		}
	}
	if length < 0 {
		return errors.New("http: response without Content-Length")
	}
	if err := b.skip(length); err != nil {
		return err
	}
	return failed
}

// headerValue is the value of header line h when its name is name (lower case).
func headerValue(h []byte, name string) ([]byte, bool) {
	i := bytes.IndexByte(h, ':')
	if i != len(name) || !bytes.EqualFold(h[:i], []byte(name)) {
		return nil, false
	}
	return bytes.TrimSpace(h[i+1:]), true
}

// Ping sends PING on a RESP connection and reads its +PONG, within timeout.
func Ping(c net.Conn, timeout time.Duration) error {
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", buf)
	}
	return nil
}
