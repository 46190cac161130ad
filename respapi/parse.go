package respapi

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/leapcount/leapcount/counter"
)

// parseOp reads the arguments of an SW.* command (args[0] is its name) as an op of
// kind:
//
//	SW.INCR  key window [BY n] [BUCKETS b]
//	SW.COUNT key window [BUCKETS b]
//	SW.ALLOW key window limit [BY n] [BUCKETS b]
//	SW.RESET key window [BUCKETS b]
//
// Options are case-insensitive and come in any order. The op it returns is valid.
func parseOp(kind counter.Kind, args [][]byte, limits counter.Limits) (counter.Op, error) {
	op := counter.Op{Kind: kind, Buckets: counter.DefaultBuckets, N: 1}
	positional := 3 // name, key, window
	if kind == counter.Allow {
		positional = 4 // and limit
	}
	if len(args) < positional {
		return op, wrongArity(opName(kind))
	}
	op.Key = string(args[1])
	var err error
	if op.Window, err = counter.ParseWindow(string(args[2])); err != nil {
		return op, err
	}
	if kind == counter.Allow {
		if op.Limit, err = strconv.ParseInt(string(args[3]), 10, 64); err != nil {
			return op, fmt.Errorf("%w: limit %s is not an integer or out of range", counter.ErrBadLimit, quoteArg(args[3]))
		}
	}
	if err := parseOptions(&op, args[positional:]); err != nil {
		return op, err
	}
	return op, limits.Check(&op)
}

var (
	optBy      = []byte("BY")
	optBuckets = []byte("BUCKETS")
)

// parseOptions reads the BY and BUCKETS options into op.
func parseOptions(op *counter.Op, opts [][]byte) error {
	takesBy := op.Kind == counter.Incr || op.Kind == counter.Allow
	var sawBy, sawBuckets bool
	for i := 0; i < len(opts); i += 2 {
		name := opts[i]
		isBy := takesBy && bytes.EqualFold(name, optBy)
		if !isBy && !bytes.EqualFold(name, optBuckets) {
			return syntaxError(fmt.Sprintf("unknown option %s for '%s'", quoteArg(name), opName(op.Kind)))
		}
		seen := &sawBuckets
		if isBy {
			seen = &sawBy
		}
		if *seen {
			return syntaxError(fmt.Sprintf("option %s given twice", quoteArg(name)))
		}
		*seen = true
		if i+1 == len(opts) {
			return syntaxError(fmt.Sprintf("option %s needs a value", quoteArg(name)))
		}
		if err := setOption(op, isBy, opts[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// setOption sets n (isBy) or the bucket count from an option's value.
func setOption(op *counter.Op, isBy bool, value []byte) error {
	if isBy {
		n, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil {
			return fmt.Errorf("%w: BY %s is not an integer or out of range", counter.ErrBadN, quoteArg(value))
		}
		op.N = n
		return nil
	}
	// Atoi rather than a narrowed ParseInt: where int is 32 bits, a huge value is then
	// a range error, not a wrapped-around valid count.
	b, err := strconv.Atoi(string(value))
	if err != nil {
		return fmt.Errorf("%w: BUCKETS %s is not an integer or out of range", counter.ErrBadBuckets, quoteArg(value))
	}
	op.Buckets = b
	return nil
}

// opName is the lower-case command name of an op kind, as replies name it.
func opName(kind counter.Kind) string { return "sw." + kind.String() }

// quoteArg quotes a client's argument for an error reply, cut short if long.
func quoteArg(arg []byte) string {
	const max = 64
	if len(arg) > max {
		return "'" + string(arg[:max]) + "...'"
	}
	return "'" + string(arg) + "'"
}
