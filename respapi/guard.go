package respapi

import (
	"bytes"
	"fmt"
)

// The guard checks the framing of what a client sends as it arrives, so that the
// server knows where each whole command ends before it parses any (nextCommand), and
// refuses what no parser should loop on.
//
// A parser that trusts the counts it is sent (redcon v1.6.2's, which served RESP
// before the event loops, did) loops once per claimed argument whether or not the bytes
// are there: "*9223372036854775807\r\n" (22 bytes) keeps a core busy for good;
// "*2147483647\r\n" costs seconds of CPU on every read. A parser that starts again
// from the start of an unfinished command on every read parses a command arriving in
// small pieces once per piece: a 64 KiB inline line sent a byte at a time costs about
// 2·10⁹ byte compares.
//
// The guard is a state machine over the bytes as they are read: O(1) work per byte
// (bulk data skipped in one step, inline lines searched with bytes.IndexByte), never
// going back. It rejects a multibulk count above maxArgs or below -1, a bulk length
// above the connection's byte cap (MaxUnanswered: "request too large") or negative,
// anything but '$' where a bulk header is due, a header line longer than
// maxHeaderLine, and an inline line longer than maxInline: the client gets
// "-ERR Protocol error: ..." and is dropped. "*0" and "*-1", which Redis skips, are
// framed as commands; nextCommand refuses them, as redcon did. Its cost is measured by
// BenchmarkRead ("scan-only").
const (
	// maxArgs is the most elements a multibulk command may have, its name included.
	// The longest command we answer has 8 (SW.ALLOW key window limit BY n BUCKETS b);
	// 1024 leaves room for CONFIG GET, INFO or COMMAND DOCS with many names, and
	// bounds the work per command. (Redis allows 1024*1024.)
	maxArgs = 1024
	// maxHeaderLine is the longest "*<count>\r\n" or "$<length>\r\n" line, in bytes:
	// room for any valid number with leading zeros, and a bound on them.
	maxHeaderLine = 32
	// maxInline is the longest inline command line, CR included (Redis's
	// PROTO_INLINE_MAX_SIZE).
	maxInline = 64 << 10
)

// States of the guard.
const (
	atCommand  = iota // at the first byte of a command
	inInline          // in an inline command's line
	inHeader          // in the number of a "*<count>" or "$<length>" line
	atHeaderLF        // after the number's '\r'
	atBulk            // where the '$' of the next argument is due
	inData            // in a bulk argument's data
	atDataCR          // after the data, where its '\r' is due
	atDataLF          // where its '\n' is due
)

// guard is the framing state of one connection.
type guard struct {
	maxBulk int64 // longest bulk argument

	state  uint8
	marker byte  // '*' or '$': the header being read
	neg    bool  // the header's number has a minus sign
	digits int   // the header's digits so far
	room   int   // the most digits the header line has room for
	n      int64 // the header's number so far
	max    int64 // the largest number the header may carry
	count  int64 // arguments of this command (once its header is read)
	args   int64 // arguments still due in this command
	left   int64 // data bytes still due in this argument
	line   int   // bytes of the inline line so far
}

// protocolError is a framing error: the client is told ("-ERR Protocol error: ...")
// and dropped.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return "Protocol error: " + e.msg }

var (
	errInvalidMultibulk = &protocolError{"invalid multibulk length"}
	errInvalidBulk      = &protocolError{"invalid bulk length"}
	errBigCountLine     = &protocolError{"too big mbulk count string"}
	errBigLengthLine    = &protocolError{"too big bulk count string"}
	errBigInline        = &protocolError{"too big inline request"}
)

// scan checks p, the next bytes from the client. end is the offset in p just after the
// last command that ends in p, or -1 if none does; err is set when p breaks the
// framing, and then end is the last command end before the bad byte.
func (g *guard) scan(p []byte) (end int, err error) {
	end = -1
	for i := 0; i < len(p); i++ {
		b := p[i]
		switch g.state {
		case atCommand:
			if b == '*' {
				g.header('*')
				continue
			}
			g.state, g.line = inInline, 0
			fallthrough
		case inInline:
			nl := bytes.IndexByte(p[i:], '\n')
			if nl < 0 {
				nl = len(p) - i
			}
			if g.line += nl; g.line > maxInline {
				return end, errBigInline
			}
			if i += nl; i < len(p) {
				end, g.state = i+1, atCommand
			}
		case inHeader:
			for '0' <= b && b <= '9' && i+1 < len(p) { // all but the last byte of p
				if err := g.digit(b); err != nil {
					return end, err
				}
				i++
				b = p[i]
			}
			if err := g.headerByte(b); err != nil {
				return end, err
			}
		case atHeaderLF:
			if b != '\n' {
				return end, g.invalid()
			}
			if g.headerDone() {
				end = i + 1
			}
		case atBulk:
			if b != '$' {
				return end, &protocolError{fmt.Sprintf("expected '$', got '%s'", printable(b))}
			}
			g.header('$')
		case inData:
			skip := min(g.left, int64(len(p)-i))
			g.left -= skip
			i += int(skip) - 1
			if g.left == 0 {
				g.state = atDataCR
			}
		case atDataCR:
			if b != '\r' {
				return end, errInvalidBulk
			}
			g.state = atDataLF
		case atDataLF:
			if b != '\n' {
				return end, errInvalidBulk
			}
			if g.args--; g.args == 0 {
				end, g.state = i+1, atCommand
			} else {
				g.state = atBulk
			}
		}
	}
	return end, nil
}

// header starts reading the number of a line that began with marker.
func (g *guard) header(marker byte) {
	g.state, g.marker, g.neg, g.digits, g.n = inHeader, marker, false, 0, 0
	g.room = maxHeaderLine - 3 // the marker and CRLF
	g.max = maxArgs
	if marker == '$' {
		g.max = g.maxBulk
	}
}

// headerByte takes one byte of a header's number.
func (g *guard) headerByte(b byte) error {
	switch {
	case '0' <= b && b <= '9':
		return g.digit(b)
	case b == '-' && g.digits == 0 && !g.neg && g.marker == '*':
		g.neg, g.room, g.max = true, g.room-1, 1 // "*-1" is the one negative count
	case b == '\r' && g.digits > 0:
		g.state = atHeaderLF
	default:
		return g.invalid()
	}
	return nil
}

// digit takes one digit of a header's number.
func (g *guard) digit(b byte) error {
	if g.digits++; g.digits > g.room {
		if g.marker == '*' {
			return errBigCountLine
		}
		return errBigLengthLine
	}
	if g.n = g.n*10 + int64(b-'0'); g.n > g.max {
		if g.marker == '$' {
			return errTooLarge // a bulk longer than the connection's byte cap
		}
		return errInvalidMultibulk
	}
	return nil
}

// headerDone acts on a complete header line, and reports whether it ended a command.
func (g *guard) headerDone() bool {
	switch {
	case g.marker == '$':
		g.left, g.state = g.n, inData
		if g.n == 0 {
			g.state = atDataCR
		}
	case g.n == 0 || g.neg:
		// "*0" or "*-1" (headerByte took no other negative count): a whole command
		// of no arguments. nextCommand refuses it; Redis would skip it.
		g.state = atCommand
		return true
	default:
		g.count, g.args, g.state = g.n, g.n, atBulk
	}
	return false
}

func (g *guard) invalid() error {
	if g.marker == '*' {
		return errInvalidMultibulk
	}
	return errInvalidBulk
}

// printable is b as an error reply may quote it: itself if printable ASCII, else \xNN.
func printable(b byte) string {
	if ' ' <= b && b <= '~' {
		return string(b)
	}
	return fmt.Sprintf(`\x%02x`, b)
}
