package h2grpc

import (
	"encoding/binary"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
)

// appendFrame appends an HTTP/2 frame with payload p.
func appendFrame(b []byte, t http2.FrameType, flags http2.Flags, id uint32, p []byte) []byte {
	n := len(p)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), byte(t), byte(flags))
	b = binary.BigEndian.AppendUint32(b, id&(1<<31-1))
	return append(b, p...)
}

// appendFrameHeader appends the 9-byte header of a frame whose n-byte payload follows.
func appendFrameHeader(b []byte, t http2.FrameType, flags http2.Flags, id uint32, n int) []byte {
	b = append(b, byte(n>>16), byte(n>>8), byte(n), byte(t), byte(flags))
	return binary.BigEndian.AppendUint32(b, id&(1<<31-1))
}

// HPACK without the dynamic table: each field is a static-table index or a literal
// "without indexing", so a header block depends on nothing sent before it.

// appendHpackInt appends i with an n-bit prefix whose high bits are first.
func appendHpackInt(b []byte, first byte, n uint, i uint64) []byte {
	max := uint64(1)<<n - 1
	if i < max {
		return append(b, first|byte(i))
	}
	b = append(b, first|byte(max))
	for i -= max; i >= 128; i >>= 7 {
		b = append(b, byte(i&127)|128)
	}
	return append(b, byte(i))
}

// appendLiteral appends name: value as a literal without indexing, with a new name.
func appendLiteral(b []byte, name, value string) []byte {
	b = append(b, 0)
	b = appendHpackInt(b, 0, 7, uint64(len(name)))
	b = append(b, name...)
	b = appendHpackInt(b, 0, 7, uint64(len(value)))
	return append(b, value...)
}

// status200 is ":status: 200", index 8 of the static table.
const status200 = 0x88

var (
	// okHeaders opens a response.
	okHeaders = appendLiteral([]byte{status200}, "content-type", "application/grpc")
	// okTrailers end a call that succeeded.
	okTrailers = appendLiteral(nil, "grpc-status", "0")
)

// appendStatusFields appends grpc-status and, when not empty, grpc-message.
func appendStatusFields(b []byte, code codes.Code, msg string) []byte {
	b = appendLiteral(b, "grpc-status", strconv.Itoa(int(code)))
	if msg != "" {
		b = appendLiteral(b, "grpc-message", encodeMessage(msg))
	}
	return b
}

// encodeMessage percent-encodes grpc-message as the gRPC HTTP/2 spec asks: bytes
// outside printable ASCII, and '%'.
func encodeMessage(msg string) string {
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte("0123456789ABCDEF"[c>>4])
		b.WriteByte("0123456789ABCDEF"[c&15])
	}
	return b.String()
}

// parseTimeout reads grpc-timeout: 1 to 8 digits and a unit (H M S m u n).
func parseTimeout(v string) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n, err := strconv.ParseUint(v[:len(v)-1], 10, 64)
	if err != nil {
		return 0, false
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	if n > uint64(1<<63-1)/uint64(unit) {
		return 1<<63 - 1, true
	}
	return time.Duration(n) * unit, true
}
