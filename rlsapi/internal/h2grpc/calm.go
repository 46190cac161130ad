package h2grpc

import (
	"errors"
	"io"
	"time"

	"golang.org/x/net/http2"
)

// A client may not make the server work for frames that carry no call: floods of
// PING (CVE-2019-9512), SETTINGS (CVE-2019-9515), RST_STREAM (CVE-2019-9514), empty
// frames (CVE-2019-9518), CONTINUATION (CVE-2024-27316; golang.org/x/net's framer
// reads any number of empty ones into one header block) and streams opened and reset
// at once (rapid reset, CVE-2023-44487). Answering each costs little, but a client
// sends millions a second, and a connection flooding so would take a core from every
// other client. So each connection has a budget of idle frames, and one that goes
// past it is sent GOAWAY ENHANCE_YOUR_CALM and closed:
//
//   - Idle frames: PING, SETTINGS, RST_STREAM, WINDOW_UPDATE, PRIORITY, GOAWAY,
//     CONTINUATION, frames of unknown types, and DATA that is empty and does not end
//     its stream. The budget holds idleFrameBurst; it refills by idleFrameRate a
//     second, and each HEADERS frame (a call opened, or ended by trailers) adds
//     idleFramesPerCall: a gRPC client's own (a BDP ping per answer, a WINDOW_UPDATE
//     now and then, a cancelled call's RST_STREAM) never drain it.
//   - Early resets: a connection whose client reset more than half its calls before
//     they were answered, once minEarlyResets were, is closed the same way (as Envoy
//     does, overload.premature_reset_total_stream_count).
//
// A connection cut so has cost the node at most idleFrameBurst frames (and, for rapid
// reset, minEarlyResets calls opened) besides its handshake.
//
// The frames are counted as their bytes arrive (meter, under the framer's buffer), so
// a header block of empty CONTINUATIONs, which the framer reads whole before the
// connection sees a frame of it, is counted too.

const (
	idleFrameBurst    = 200
	idleFrameRate     = 100 // a second
	idleFramesPerCall = 2
	minEarlyResets    = 50
)

// errCalm ends a connection that went past its budget of idle frames or early resets.
var errCalm = errors.New("h2grpc: too many frames that carry no call, or calls reset before their answer")

// meter reads a connection's bytes for the framer and counts its frames, by their
// headers, against the budget of idle frames. It runs on the reader.
type meter struct {
	r        io.Reader
	hdr      [9]byte
	nh       int // bytes of the frame header being read
	skip     int // bytes of the frame's payload still to come
	budget   float64
	refilled time.Time
	err      error // errCalm once the budget ran out
}

func newMeter(r io.Reader) *meter {
	return &meter{r: r, budget: idleFrameBurst, refilled: time.Now()}
}

// Read reads from the connection. A read that runs the budget out passes on its
// bytes up to the end of the frame header that did, and errCalm after them: the
// framer parses no frame past it.
func (m *meter) Read(p []byte) (int, error) {
	if m.err != nil {
		return 0, m.err
	}
	n, err := m.r.Read(p)
	if n > 0 {
		m.refill(time.Now())
		n = m.scan(p[:n])
	}
	if m.err != nil {
		err = m.err
	}
	return n, err
}

func (m *meter) refill(now time.Time) {
	if d := now.Sub(m.refilled); d > 0 {
		m.budget = min(idleFrameBurst, m.budget+d.Seconds()*idleFrameRate)
		m.refilled = now
	}
}

// scan follows the frames in b, counting each as its header completes, and returns
// how much of b to pass on: all of it, or up to the header that ran the budget out.
func (m *meter) scan(b []byte) int {
	i := 0
	for i < len(b) {
		if m.skip > 0 {
			k := min(m.skip, len(b)-i)
			m.skip -= k
			i += k
			continue
		}
		k := copy(m.hdr[m.nh:], b[i:])
		m.nh += k
		i += k
		if m.nh < len(m.hdr) {
			break
		}
		m.nh = 0
		m.skip = int(m.hdr[0])<<16 | int(m.hdr[1])<<8 | int(m.hdr[2])
		if !m.count(http2.FrameType(m.hdr[3]), http2.Flags(m.hdr[4]), m.skip) {
			m.err = errCalm
			return i
		}
	}
	return len(b)
}

// count spends the budget on an idle frame, or adds to it for a HEADERS frame; it
// reports false when the budget ran out.
func (m *meter) count(t http2.FrameType, flags http2.Flags, length int) bool {
	switch {
	case t == http2.FrameHeaders:
		m.budget = min(idleFrameBurst, m.budget+idleFramesPerCall)
		return true
	case t == http2.FrameData && (length > 0 || flags.Has(http2.FlagDataEndStream)):
		return true
	}
	m.budget--
	return m.budget >= 0
}

// earlyReset counts a call the client reset before its answer ended; it returns
// errCalm once such calls are more than half of those opened, and at least
// minEarlyResets. It runs on the reader.
func (c *conn) earlyReset() error {
	c.earlyResets++
	if c.earlyResets >= minEarlyResets && 2*c.earlyResets > c.opened {
		return errCalm
	}
	return nil
}
