package respapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/redcon"
)

// testCap is the byte cap (MaxUnanswered) of the guards in these tests.
const testCap = DefaultMaxUnanswered

// endsByteByByte runs a fresh guard over in one byte at a time, and returns the
// offsets in in just after each command, and the guard's error with the offset of
// the byte it refused.
func endsByteByByte(in []byte) (ends []int, bad int, err error) {
	g := guard{maxBulk: testCap}
	for i := range in {
		end, err := g.scan(in[i : i+1])
		if err != nil {
			return ends, i, err
		}
		if end == 1 {
			ends = append(ends, i+1)
		}
	}
	return ends, len(in), nil
}

// checkPieces runs a fresh guard over in cut into pieces of the given sizes (cycled)
// and checks that it agrees with endsByteByByte: each piece's end is the last command
// end in it, and the error is the same, on the same piece.
func checkPieces(t *testing.T, name string, in []byte, sizes ...int) error {
	t.Helper()
	ends, bad, wantErr := endsByteByByte(in)
	g := guard{maxBulk: testCap}
	for off, i := 0, 0; off < len(in); i++ {
		n := min(len(in)-off, sizes[i%len(sizes)])
		end, err := g.scan(in[off : off+n])
		want := -1
		for _, e := range ends {
			if off < e && e <= off+n {
				want = e - off
			}
		}
		if end != want {
			t.Fatalf("%s in pieces of %v: piece [%d:%d] ends at %d; want %d", name, sizes, off, off+n, end, want)
		}
		errHere := wantErr != nil && off <= bad && bad < off+n
		if errHere != (err != nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("%s in pieces of %v: piece [%d:%d]: error %v; want %v at %d", name, sizes, off, off+n, err, wantErr, bad)
		}
		if err != nil {
			return err
		}
		off += n
	}
	return nil
}

func TestGuardRejects(t *testing.T) {
	maxArgsOK := fmt.Sprintf("*%d\r\n", maxArgs)
	for _, c := range []struct {
		name, in string
		want     error
	}{
		{"count 2^63-1", "*9223372036854775807\r\n", errInvalidMultibulk},
		{"count 2^31-1", "*2147483647\r\n", errInvalidMultibulk},
		{"count 2^64 wraps in redcon", "*18446744073709551617\r\n", errInvalidMultibulk},
		{"count over maxArgs", fmt.Sprintf("*%d\r\n", maxArgs+1), errInvalidMultibulk},
		{"count -2", "*-2\r\n", errInvalidMultibulk},
		{"count -10", "*-10\r\n", errInvalidMultibulk},
		{"count empty", "*\r\n", errInvalidMultibulk},
		{"count only a sign", "*-\r\n", errInvalidMultibulk},
		{"count with plus", "*+1\r\n", errInvalidMultibulk},
		{"count with letter", "*1x\r\n", errInvalidMultibulk},
		{"count two signs", "*--1\r\n", errInvalidMultibulk},
		{"count LF without CR", "*1\n", errInvalidMultibulk},
		{"count CR without LF", "*1\rx", errInvalidMultibulk},
		{"count line too long", "*" + strings.Repeat("0", maxHeaderLine-2) + "1\r\n", errBigCountLine},
		{"not a bulk", "*1\r\n+PING\r\n", &protocolError{"expected '$', got '+'"}},
		{"not a bulk, unprintable", "*1\r\n\x00", &protocolError{`expected '$', got '\x00'`}},
		{"not a bulk, newline", "*2\r\n$1\r\na\r\n\n", &protocolError{`expected '$', got '\x0a'`}},
		{"bulk negative", "*1\r\n$-1\r\n", errInvalidBulk},
		{"bulk empty length", "*1\r\n$\r\n\r\n", errInvalidBulk},
		{"bulk over the cap", fmt.Sprintf("*1\r\n$%d\r\n", testCap+1), errTooLarge},
		{"bulk 2^63-1", "*1\r\n$9223372036854775807\r\n", errTooLarge},
		{"bulk line too long", "*1\r\n$" + strings.Repeat("0", maxHeaderLine-2) + "1\r\n", errBigLengthLine},
		{"bulk LF without CR", "*1\r\n$1\na\r\n", errInvalidBulk},
		{"bulk data longer than said", "*1\r\n$3\r\nabcd\r\n", errInvalidBulk},
		{"bulk data CR without LF", "*1\r\n$3\r\nabc\rx", errInvalidBulk},
		{"second bulk not a bulk", "*2\r\n$4\r\nPING\r\nPONG\r\n", &protocolError{"expected '$', got 'P'"}},
		{"inline too long", strings.Repeat("a", maxInline+1), errBigInline},
		{"inline too long after a command", "PING\r\n" + strings.Repeat("a", maxInline+1), errBigInline},
		{"after *1024 of valid bulks", maxArgsOK + strings.Repeat("$0\r\n\r\n", maxArgs) + "*1025\r\n", errInvalidMultibulk},
	} {
		in := []byte(c.in)
		for _, sizes := range [][]int{{len(in)}, {1}, {2, 3, 5}, {4096}} {
			if err := checkPieces(t, c.name, in, sizes...); fmt.Sprint(err) != fmt.Sprint(c.want) {
				t.Errorf("%s %q in pieces of %v: got %v; want %v", c.name, trim(c.in), sizes, err, c.want)
			}
		}
	}
}

func trim(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func TestGuardAccepts(t *testing.T) {
	for _, c := range []struct {
		name, in string
		ends     []int
	}{
		{"one command", "*1\r\n$4\r\nPING\r\n", []int{14}},
		{"empty bulk", "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", []int{20}},
		{"leading zeros within the line", "*" + strings.Repeat("0", maxHeaderLine-4) + "1\r\n$4\r\nPING\r\n", []int{14 + maxHeaderLine - 4}},
		{"*0 and *-1 go to redcon whole", "*0\r\n*-1\r\n", []int{4, 9}},
		{"inline", "PING\r\nSW.INCR k 1m\n\n", []int{6, 19, 20}},
		{"inline at the limit", strings.Repeat("a", maxInline) + "\n", []int{maxInline + 1}},
		{"inline starting with $", "$4\r\n", []int{4}},
		{"binary data", "*2\r\n$4\r\nECHO\r\n$4\r\n\r\n*\x00\r\n", []int{24}},
		{"unfinished", "*2\r\n$4\r\nECHO\r\n$100\r\nabc", nil},
		{"unfinished inline", "PING", nil},
		{"max args", fmt.Sprintf("*%d\r\n", maxArgs) + strings.Repeat("$0\r\n\r\n", maxArgs), []int{len(fmt.Sprint(maxArgs)) + 3 + 6*maxArgs}},
	} {
		in := []byte(c.in)
		for _, sizes := range [][]int{{len(in)}, {2, 3, 5}, {7}} {
			if err := checkPieces(t, c.name, in, sizes...); err != nil {
				t.Fatalf("%s in pieces of %v: %v", c.name, sizes, err)
			}
		}
		got, _, err := endsByteByByte(in)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !slices.Equal(got, c.ends) {
			t.Errorf("%s: command ends %v; want %v", c.name, got, c.ends)
		}
	}
}

// framed is every command a framer and nextCommand read from in, cut into pieces of
// the given sizes (cycled), as a session reads them, and the error they stopped at.
func framed(in []byte, sizes ...int) ([][][]byte, error) {
	f := framer{guard: guard{maxBulk: testCap}, max: 1 << 40}
	var all [][][]byte
	for i := 0; len(in) > 0; i++ {
		n := min(len(in), sizes[i%len(sizes)])
		p := bytes.Clone(in[:n]) // valid only during add, as the loop's buffer
		in = in[n:]
		b := f.add(p)
		off := 0
		for off < f.whole {
			args, k, err := nextCommand(b[off:f.whole], nil)
			if err != nil {
				return all, err
			}
			if len(args) > 0 {
				all = append(all, cloneArgs(args))
			}
			off += k
		}
		f.served(b, off, false)
		clear(p) // what was not kept is gone
		if f.err != nil {
			return all, f.err
		}
	}
	return all, io.EOF
}

// readAll is every command redcon's reader reads from r, and the error it stopped at:
// the reference the framer and nextCommand are checked against.
func readAll(r io.Reader) ([][][]byte, error) {
	rd := redcon.NewReader(r)
	var all [][][]byte
	for {
		cmds, err := rd.ReadCommands()
		if err != nil {
			return all, err
		}
		for _, c := range cmds {
			all = append(all, c.Args)
		}
	}
}

func sameCommands(a, b [][][]byte) bool {
	return slices.EqualFunc(a, b, func(x, y [][]byte) bool { return slices.EqualFunc(x, y, bytes.Equal) })
}

// everyCommand is a pipeline of every command the server answers, in RESP and inline,
// with binary arguments, a long one and the most arguments a command may have.
func everyCommand() []byte {
	var b strings.Builder
	for _, args := range [][]string{
		{"SW.INCR", "k", "1m"}, {"sw.incr", "k", "60000", "BY", "5", "BUCKETS", "6"},
		{"SW.COUNT", "k", "1m", "BUCKETS", "10"}, {"SW.ALLOW", "k", "10s", "5", "BY", "2", "BUCKETS", "10"},
		{"SW.RESET", "k", "1m"}, {"PING"}, {"PING", "hi"}, {"ECHO", "a\r\nb*2\r\n$1\r\n"}, {"ECHO", ""},
		{"ECHO", strings.Repeat("x", 200<<10+17)}, {"HELLO", "2", "AUTH", "default", "s3cret", "SETNAME", "me"},
		{"AUTH", "s3cret"}, {"AUTH", "user", "s3cret"}, {"SELECT", "0"}, {"COMMAND"}, {"COMMAND", "DOCS"},
		{"INFO", "server"}, {"CONFIG", "GET", "save", "appendonly"}, {"CLIENT", "SETNAME", "me"},
		{"CLIENT", "SETINFO", "lib-name", "go-redis"}, {"SW.INCR", "k\x00\xff", "1m"}, {"QUIT"},
	} {
		b.WriteString(encode(args...))
	}
	b.WriteString("PING\r\nSW.INCR k 1m BY 2\n\r\n  ping  \"a b\" 'c\\'d' \"e\\n\"\r\n")
	b.WriteString(encode(append([]string{"CONFIG", "GET"}, strings.Split(strings.Repeat("p ", maxArgs-2), " ")[:maxArgs-2]...)...))
	return []byte(b.String())
}

// A valid pipeline of all our commands, cut anywhere, is read as the same commands as
// redcon's reader reads from it whole.
func TestFramerReadsValidPipelinesAsRedconDoes(t *testing.T) {
	in := everyCommand()
	want, err := readAll(bytes.NewReader(in))
	if err != io.EOF {
		t.Fatalf("redcon: %v", err)
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	cuts := [][]int{{len(in)}, {1}, {2, 3}, {4095, 4097}, {64 << 10}}
	for range 5 {
		sizes := make([]int, 50)
		for i := range sizes {
			sizes[i] = 1 + rng.IntN(1<<rng.IntN(17))
		}
		cuts = append(cuts, sizes)
	}
	for _, sizes := range cuts {
		got, err := framed(in, sizes...)
		if err != io.EOF {
			t.Fatalf("pieces of %v: %v; want io.EOF", sizes[:min(len(sizes), 5)], err)
		}
		if !sameCommands(got, want) {
			t.Fatalf("pieces of %v: got %d commands; want the %d redcon reads", sizes[:min(len(sizes), 5)], len(got), len(want))
		}
	}
}

// The commands before a bad one are read; the bad one is not, and reading ends with
// the guard's error.
func TestFramerReadsWholeCommandsBeforeTheError(t *testing.T) {
	in := []byte(encode("PING") + "PING\r\n" + encode("ECHO", "x") + "*9223372036854775807\r\n" + encode("PING"))
	for _, sizes := range [][]int{{len(in)}, {1}, {5}} {
		got, err := framed(in, sizes...)
		if !errors.Is(err, errInvalidMultibulk) {
			t.Fatalf("pieces of %v: got %v; want %v", sizes, err, errInvalidMultibulk)
		}
		if len(got) != 3 {
			t.Fatalf("pieces of %v: got %d commands; want 3", sizes, len(got))
		}
	}
}

// What redcon refuses besides the framing, nextCommand refuses too: "*0", "*-1",
// unbalanced quotes in an inline line.
func TestNextCommandRefusesWhatRedconRefuses(t *testing.T) {
	for _, in := range []string{"*0\r\n", "*-1\r\n", "SET \"a\r\n", "SET a\"b\r\n", "SET \"a\"b\r\n", "SET 'a\\\r\n"} {
		_, wantErr := readAll(strings.NewReader(in))
		_, _, err := nextCommand([]byte(in), nil)
		if err == nil || wantErr == nil || err.Error() != wantErr.Error() {
			t.Errorf("%q: got %v; want redcon's %v", in, err, wantErr)
		}
	}
}
