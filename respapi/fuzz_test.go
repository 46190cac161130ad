package respapi

import (
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
