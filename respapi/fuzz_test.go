package respapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/counter"
)

// FuzzParseCommand feeds command lines, split on spaces into arguments, to the
// parser of the SW.* commands. It must never panic, every error must be the client's
// (bad input), and an op that parses must pass Validate as the command's kind.
func FuzzParseCommand(f *testing.F) {
	f.Add("SW.INCR k 60s BY 5 BUCKETS 6")
	f.Add("sw.allow k 1h 4611686018427387904 by 2147483647 buckets 3600")
	f.Add("SW.COUNT k 10s BUCKETS")
	f.Add("SW.RESET  1ms")
	limits := counter.Limits{}
	f.Fuzz(func(t *testing.T, line string) {
		words := strings.Split(line, " ")
		args := make([][]byte, len(words))
		for i, w := range words {
			args[i] = []byte(w)
		}
		cmd := lookup(args[0])
		if cmd == nil || cmd.kind == 0 {
			return
		}
		op, err := parseOp(cmd.kind, args, limits)
		if err != nil {
			if !counter.IsBadInput(err) {
				t.Fatalf("parse error %q is not bad input", err)
			}
			return
		}
		if verr := limits.Validate(&op); verr != nil {
			t.Fatalf("parsed op %+v does not validate: %v", op, verr)
		}
		if op.Kind != cmd.kind {
			t.Fatalf("got kind %v; want %v", op.Kind, cmd.kind)
		}
	})
}

// FuzzGuard checks the guard against redcon on any input, cut anywhere: cut into
// pieces it finds the same command ends and the same error as byte by byte; what it
// hands redcon is a prefix of the input; and on the commands it let through, redcon
// reads what it reads from them without the guard. (redcon alone is only ever given
// input the guard let through: other input may keep it busy for good.) A cut byte c
// makes a piece of 1+c² bytes; no cuts, one piece.
func FuzzGuard(f *testing.F) {
	// More seeds, the attacks among them, are in testdata/fuzz/FuzzGuard.
	f.Add(everyCommand(), []byte{7, 200, 13})
	f.Fuzz(func(t *testing.T, in, cuts []byte) {
		sizes := []int{len(in) + 1}
		if len(cuts) > 0 {
			sizes = sizes[:0]
			for _, c := range cuts {
				sizes = append(sizes, 1+int(c)*int(c))
			}
		}
		gerr := checkPieces(t, "input", in, sizes...)
		ends, _, _ := endsByteByByte(in)
		valid := 0
		if len(ends) > 0 {
			valid = ends[len(ends)-1]
		}
		got, err := framed(in, sizes...)
		var pe *protocolError
		switch {
		case err == io.EOF && gerr == nil:
		case errors.As(err, &pe) && gerr != nil && err.Error() == gerr.Error():
		case strings.HasPrefix(fmt.Sprint(err), "Protocol error: "):
			// nextCommand refused input the guard let through (*0, unbalanced quotes):
			// so must redcon.
			if _, rerr := readAll(bytes.NewReader(in[:valid])); rerr == io.EOF {
				t.Fatalf("framed: %v; redcon reads the same input", err)
			}
			return
		default:
			t.Fatalf("reading ended with %v; want io.EOF or the guard's %v", err, gerr)
		}
		want, uerr := readAll(bytes.NewReader(in[:valid]))
		if uerr != io.EOF {
			t.Fatalf("redcon: %v; the framer read it all", uerr)
		}
		if !sameCommands(got, want) {
			t.Fatalf("the framer read %d commands; redcon, %d", len(got), len(want))
		}
	})
}
