package counter

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/leapcount/leapcount/hashslot"
)

// Bounds of the contract.
const (
	DefaultMaxKeyBytes = 256
	DefaultBuckets     = 10
	MinWindowMs        = 1
	MaxWindowMs        = 31 * 24 * 3600 * 1000 // 31 days
	MaxBuckets         = 3600
	MaxN               = 1<<31 - 1
	MaxLimit           = 1 << 62
	MaxBatch           = 1000 // ops in one /v1/batch request
)

// Kind names one of the four operations clients send, or one of the two that only
// nodes send each other (Borrow, Return: limit slices, docs/slices-and-replicas.md).
type Kind uint8

// The operations. The zero Kind is invalid, so an Op whose Kind was never set fails Validate.
const (
	Incr Kind = iota + 1
	Count
	Allow
	Reset
	// Borrow asks the owner for a slice of the limit: up to Ask units, added to the
	// counter at once, that the asking node may then admit itself until the slice ends
	// (Result.Lent). It is an allow of N (0: an ask alone, answered allowed while the
	// count is within the limit). Only nodes send it, to peers that take it.
	Borrow
	// Return gives back N units of slice SliceID that its borrower did not spend. Only
	// nodes send it.
	Return
)

var kindNames = [...]string{Incr: "incr", Count: "count", Allow: "allow", Reset: "reset", Borrow: "borrow", Return: "return"}

func (k Kind) String() string {
	if k >= Incr && k <= Return {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind maps "incr", "count", "allow", "reset" (any case) to a Kind: the kinds
// clients send.
func ParseKind(s string) (Kind, error) {
	for k := Incr; k <= Reset; k++ {
		if strings.EqualFold(s, kindNames[k]) {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w %q: want incr, count, allow or reset", ErrUnknownOp, s)
}

// Op is one operation on one counter. Window is in milliseconds. N and Limit are
// used only by the kinds that take them (N: incr, allow; Limit: allow).
//
// An op is checked once, where it enters the node (a front end's parser, or the
// router for ops a peer forwards): Limits.Check validates it and stamps it with its
// key's hash slot, which every layer below routes by. The layers below take a checked
// op as given (Limits.Ready costs them one comparison).
type Op struct {
	Kind    Kind
	checked bool   // Check passed it: Slot is its key's
	Slot    uint16 // the key's hash slot (hashslot.Of), set by Check
	Key     string
	Window  int64
	Buckets int
	N       int64
	Limit   int64  // allow, Borrow; on an incr, the limit its count is judged by (slices)
	Ask     int64  // Borrow: the most the slice asked for may hold
	SliceID uint64 // Return: the slice given back
}

// Checked reports whether Check passed op (and so set its Slot).
func (op *Op) Checked() bool { return op.checked }

// Result is what an op answered. Count is set for every kind but reset; Allowed,
// Remaining and RetryAfterMs for allow; Existed for reset. Err, when set, means the op
// was not decided (and changed nothing).
//
// Undecided, when set, marks an allow answered by the fail policy (see
// route.Router.FailOpen) because no decision came back: none could be made, or its
// answer was lost. It holds why (an error wrapping ErrUnavailable, ErrFull or
// ErrOutcomeUnknown: with the last, the owner may have admitted it). Allowed is the
// policy's answer, not a decision; Count and Remaining are unknown, -1 (a decision
// never counts below 0); RetryAfterMs is one bucket when denied, 0 when allowed. Err
// is nil: the client gets an answer, marked as the policy's in every API.
type Result struct {
	Count   int64
	Allowed bool
	Existed bool // next to Allowed: the bools share one word
	// Sliced: an allow decided by a node that holds a slice of the limit, not by the
	// owner; Count and Remaining are that node's estimate (the owner's last figures and
	// what it spent since).
	Sliced       bool
	Remaining    int64
	RetryAfterMs int64
	Err          error
	Undecided    error
	Lent         *Lent // Borrow: the slice lent with the answer, if any
}

// Lent is a slice of a limit lent to the node that sent a Borrow: N units, already
// counted in the counter's current bucket, that it may admit until TTL has passed on
// its own monotonic clock since it sent the Borrow (less its allowance for clock rates).
// The owner ends a slice no later than that bucket and no later than its own lease.
type Lent struct {
	ID  uint64
	N   int64
	TTL time.Duration
}

// Limits are the bounds a node enforces that its flags can change.
type Limits struct {
	MaxKeyBytes int // 0 means DefaultMaxKeyBytes
}

func (l Limits) maxKey() int {
	if l.MaxKeyBytes <= 0 {
		return DefaultMaxKeyBytes
	}
	return l.MaxKeyBytes
}

// Check validates op and, when it is valid, stamps it checked with its key's hash slot.
// It does not fill defaults: parsers set Buckets and N to their defaults when the
// request leaves them out.
func (l Limits) Check(op *Op) error {
	if err := l.Validate(op); err != nil {
		op.checked = false
		return err
	}
	op.Slot, op.checked = hashslot.Of(op.Key), true
	return nil
}

// Ready is Check for an op that may have been checked already (the layers below a
// front end): a checked op costs one comparison.
func (l Limits) Ready(op *Op) error {
	if op.checked {
		return nil
	}
	return l.Check(op)
}

// Validate checks op against the contract's bounds, without stamping it (see Check).
func (l Limits) Validate(op *Op) error {
	if op.Kind < Incr || op.Kind > Return {
		return fmt.Errorf("%w: %v", ErrUnknownOp, op.Kind)
	}
	if err := l.ValidateKey(op.Key); err != nil {
		return err
	}
	if err := ValidateSpec(op.Window, op.Buckets); err != nil {
		return err
	}
	if op.Kind == Incr || op.Kind == Allow || op.Kind == Return {
		if op.N < 1 || op.N > MaxN {
			return fmt.Errorf("%w: n must be from 1 to %d, got %d", ErrBadN, MaxN, op.N)
		}
	}
	if op.Kind == Borrow && (op.N < 0 || op.N > MaxN) {
		return fmt.Errorf("%w: n must be from 0 to %d, got %d", ErrBadN, MaxN, op.N)
	}
	if (op.Kind == Allow || op.Kind == Borrow) && (op.Limit < 0 || op.Limit > MaxLimit) {
		return fmt.Errorf("%w: limit must be from 0 to %d, got %d", ErrBadLimit, int64(MaxLimit), op.Limit)
	}
	if op.Kind == Borrow && (op.Ask < 1 || op.Ask > MaxN) {
		return fmt.Errorf("%w: a slice's ask must be from 1 to %d, got %d", ErrBadArgument, MaxN, op.Ask)
	}
	return nil
}

// ValidateKey checks a key's length.
func (l Limits) ValidateKey(key string) error {
	if key == "" {
		return ErrEmptyKey
	}
	if max := l.maxKey(); len(key) > max {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrKeyTooLong, len(key), max)
	}
	return nil
}

// ValidateSpec checks a window (ms) and a bucket count.
func ValidateSpec(windowMs int64, buckets int) error {
	if windowMs < MinWindowMs || windowMs > MaxWindowMs {
		return fmt.Errorf("%w: must be from 1ms to 31 days (%dms), got %dms", ErrBadWindow, int64(MaxWindowMs), windowMs)
	}
	if buckets < 1 || buckets > MaxBuckets {
		return fmt.Errorf("%w: must be from 1 to %d, got %d", ErrBadBuckets, MaxBuckets, buckets)
	}
	if windowMs%int64(buckets) != 0 {
		return fmt.Errorf("%w: window %dms does not divide evenly into %d buckets", ErrBadBuckets, windowMs, buckets)
	}
	return nil
}

// DoExcept decides with do the ops that reject passes (returns nil for), and answers
// each of the others with the error reject gave; results keep the order of ops. When
// reject passes every op (the common case) do gets ops and results themselves: no
// copies, no allocation (BenchmarkDoExcept).
func DoExcept(ctx context.Context, ops []Op, results []Result, reject func(i int) error,
	do func(context.Context, []Op, []Result)) {
	var keep []Op // nil until an op is rejected: then the ops kept, and idx their places
	var idx []int
	for i := range ops {
		if err := reject(i); err != nil {
			if keep == nil {
				keep = append(make([]Op, 0, len(ops)), ops[:i]...)
				for j := 0; j < i; j++ {
					idx = append(idx, j)
				}
			}
			results[i] = Result{Err: err}
			continue
		}
		if keep != nil {
			keep = append(keep, ops[i])
			idx = append(idx, i)
		}
	}
	if keep == nil {
		do(ctx, ops, results)
		return
	}
	if len(keep) == 0 {
		return
	}
	res := make([]Result, len(keep))
	do(ctx, keep, res)
	for k, i := range idx {
		results[i] = res[k]
	}
}
