package loadgen

import "strconv"

// A Request appends one request for key to buf. now is the time of the batch, in
// Unix milliseconds (for the Lua scripts, which take the clock from the client); seq
// numbers the connection's requests from 1 (a unique member for a sorted set).
type Request func(buf, key []byte, now int64, seq uint64) []byte

// Arg is one argument of a RESP command: a fixed string, the key, the batch's time
// (Unix ms) or a unique member built from the time and the sequence number.
type Arg struct {
	kind argKind
	s    string
}

type argKind int

const (
	argString argKind = iota
	argKey
	argNow
	argMember
)

// Str is a fixed argument.
func Str(s string) Arg { return Arg{kind: argString, s: s} }

// Key, Now and Member are the argument slots filled per request.
var (
	Key    = Arg{kind: argKey}
	Now    = Arg{kind: argNow}
	Member = Arg{kind: argMember}
)

// Command is a RESP command of these arguments, in Redis's multibulk form.
func Command(args ...Arg) Request {
	return func(buf, key []byte, now int64, seq uint64) []byte {
		buf = appendLen(buf, '*', len(args))
		for _, a := range args {
			switch a.kind {
			case argString:
				buf = appendBulk(buf, a.s)
			case argKey:
				buf = appendBulk(buf, key)
			case argNow:
				buf = appendBulkInt(buf, now)
			case argMember:
				buf = appendMember(buf, now, seq)
			}
		}
		return buf
	}
}

func appendLen(buf []byte, prefix byte, n int) []byte {
	buf = append(buf, prefix)
	buf = strconv.AppendInt(buf, int64(n), 10)
	return append(buf, '\r', '\n')
}

func appendBulk[S string | []byte](buf []byte, s S) []byte {
	buf = appendLen(buf, '$', len(s))
	buf = append(buf, s...)
	return append(buf, '\r', '\n')
}

func appendBulkInt(buf []byte, v int64) []byte {
	var tmp [20]byte
	return appendBulk(buf, strconv.AppendInt(tmp[:0], v, 10))
}

// appendMember is "<now>-<seq>": unique per connection and time, as the seeds' logs
// use a timestamp or a UUID; the harness gives each connection its own sequence range
// (see Run), so members are unique across connections too.
func appendMember(buf []byte, now int64, seq uint64) []byte {
	var tmp [41]byte
	m := strconv.AppendInt(tmp[:0], now, 10)
	m = append(m, '-')
	m = strconv.AppendUint(m, seq, 10)
	return appendBulk(buf, m)
}

// HTTPPost is a POST of the JSON body bodyPrefix + key + bodySuffix to path, kept
// alive. The key is written as is: the harness's keys need no JSON escaping.
func HTTPPost(path, bodyPrefix, bodySuffix string) Request {
	head := "POST " + path + " HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: "
	return func(buf, key []byte, _ int64, _ uint64) []byte {
		buf = append(buf, head...)
		buf = strconv.AppendInt(buf, int64(len(bodyPrefix)+len(key)+len(bodySuffix)), 10)
		buf = append(buf, "\r\n\r\n"...)
		buf = append(buf, bodyPrefix...)
		buf = append(buf, key...)
		return append(buf, bodySuffix...)
	}
}
