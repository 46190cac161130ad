package counter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/hashslot"
)

func TestParseWindow(t *testing.T) {
	good := map[string]int64{
		"500ms": 500, "60s": 60_000, "1m": 60_000, "1h": 3_600_000, "1h30m": 5_400_000,
		"1.5s": 1500, "60000": 60_000, "1": 1, " 10s ": 10_000, "744h": MaxWindowMs,
	}
	for in, want := range good {
		if got, err := ParseWindow(in); err != nil || got != want {
			t.Errorf("ParseWindow(%q): got %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "0s", "-5s", "1us", "1.5ms", "745h", "abc", "10x", "1e3", "99999999999999999999", "2678400001"} {
		if _, err := ParseWindow(in); !errors.Is(err, ErrBadWindow) {
			t.Errorf("ParseWindow(%q): got %v; want ErrBadWindow", in, err)
		}
	}
}

// The number-and-unit forms ParseWindow reads without time.ParseDuration read as
// time.ParseDuration reads them, at every length of number around the 9 digits it takes.
func TestParseWindowShortFormsMatchParseDuration(t *testing.T) {
	for _, unit := range []string{"ms", "s", "m", "h", "us", "ns", "x", ""} {
		for _, num := range []string{"1", "007", "60", "999999999", "1000000000", "31", "2678400", "44640"} {
			in := num + unit
			got, err := ParseWindow(in)
			d, derr := time.ParseDuration(in)
			want := int64(d / time.Millisecond)
			ok := derr == nil && d%time.Millisecond == 0 && want >= MinWindowMs && want <= MaxWindowMs
			if unit == "" {
				want, derr = strconv.ParseInt(num, 10, 64)
				ok = derr == nil && want >= MinWindowMs && want <= MaxWindowMs
			}
			if ok && (err != nil || got != want) || !ok && err == nil {
				t.Errorf("ParseWindow(%q): got %d, %v; want %d (valid %v)", in, got, err, want, ok)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	ok := Op{Kind: Allow, Key: "k", Window: 60_000, Buckets: 10, N: 1, Limit: 5}
	if err := (Limits{}).Validate(&ok); err != nil {
		t.Fatalf("valid op: %v", err)
	}
	cases := []struct {
		name   string
		change func(*Op)
		want   error
	}{
		{"empty key", func(o *Op) { o.Key = "" }, ErrEmptyKey},
		{"long key", func(o *Op) { o.Key = strings.Repeat("k", 257) }, ErrKeyTooLong},
		{"zero window", func(o *Op) { o.Window = 0 }, ErrBadWindow},
		{"window over 31 days", func(o *Op) { o.Window = MaxWindowMs + 10 }, ErrBadWindow},
		{"zero buckets", func(o *Op) { o.Buckets = 0 }, ErrBadBuckets},
		{"too many buckets", func(o *Op) { o.Window, o.Buckets = 3_601_000, 3601 }, ErrBadBuckets},
		{"indivisible", func(o *Op) { o.Buckets = 7 }, ErrBadBuckets},
		{"n zero", func(o *Op) { o.N = 0 }, ErrBadN},
		{"n too large", func(o *Op) { o.N = MaxN + 1 }, ErrBadN},
		{"negative limit", func(o *Op) { o.Limit = -1 }, ErrBadLimit},
		{"limit too large", func(o *Op) { o.Limit = MaxLimit + 1 }, ErrBadLimit},
		{"no kind", func(o *Op) { o.Kind = 0 }, ErrUnknownOp},
	}
	for _, c := range cases {
		op := ok
		c.change(&op)
		err := (Limits{}).Validate(&op)
		if !errors.Is(err, c.want) || !IsBadInput(err) {
			t.Errorf("%s: got %v; want %v (bad input)", c.name, err, c.want)
		}
	}
	long := Op{Kind: Incr, Key: strings.Repeat("k", 1000), Window: 1000, Buckets: 10, N: 1}
	if err := (Limits{MaxKeyBytes: 1000}).Validate(&long); err != nil {
		t.Errorf("a raised key cap: %v", err)
	}
	reset := Op{Kind: Reset, Key: "k", Window: 1000, Buckets: 10} // n and limit do not apply
	if err := (Limits{}).Validate(&reset); err != nil {
		t.Errorf("reset without n: %v", err)
	}
}

func TestKinds(t *testing.T) {
	for _, name := range []string{"incr", "COUNT", "Allow", "reset"} {
		k, err := ParseKind(name)
		if err != nil || !strings.EqualFold(k.String(), name) {
			t.Errorf("ParseKind(%q): got %v, %v", name, k, err)
		}
	}
	if _, err := ParseKind("decr"); !errors.Is(err, ErrUnknownOp) {
		t.Errorf("ParseKind(decr): got %v; want ErrUnknownOp", err)
	}
	if IsBadInput(ErrUnavailable) || IsBadInput(ErrShuttingDown) {
		t.Error("service errors count as bad input")
	}
}

func BenchmarkParseWindow(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ParseWindow("60s"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDoExcept(t *testing.T) {
	ops := []Op{{Key: "a"}, {Key: "b"}, {Key: "c"}}
	results := make([]Result, 3)
	var decided []string
	DoExcept(context.Background(), ops, results, func(i int) error {
		if ops[i].Key == "b" {
			return ErrUnavailable
		}
		return nil
	}, func(_ context.Context, ops []Op, res []Result) {
		for k := range ops {
			decided = append(decided, ops[k].Key)
			res[k].Count = int64(len(decided))
		}
	})
	if strings.Join(decided, ",") != "a,c" {
		t.Fatalf("decided %v; want a, c", decided)
	}
	if results[0].Count != 1 || results[2].Count != 2 || !errors.Is(results[1].Err, ErrUnavailable) {
		t.Fatalf("results %+v; want counts 1 and 2 in place, b unavailable", results)
	}
}

// DoExcept against a model over every pattern of rejections of 5 ops: each rejected op
// gets its error, the others are decided once, in order, and answered in place.
func TestDoExceptEveryPattern(t *testing.T) {
	const n = 5
	for mask := 0; mask < 1<<n; mask++ {
		ops := make([]Op, n)
		for i := range ops {
			ops[i].Key = string(rune('a' + i))
		}
		results := make([]Result, n)
		var decided []string
		calls := 0
		DoExcept(context.Background(), ops, results, func(i int) error {
			if mask&(1<<i) != 0 {
				return fmt.Errorf("%w: %d", ErrUnavailable, i)
			}
			return nil
		}, func(_ context.Context, got []Op, res []Result) {
			calls++
			for k := range got {
				decided = append(decided, got[k].Key)
				res[k].Count = int64(got[k].Key[0])
			}
		})
		var want []string
		for i := range ops {
			rejected := mask&(1<<i) != 0
			if !rejected {
				want = append(want, ops[i].Key)
			}
			if rejected != errors.Is(results[i].Err, ErrUnavailable) || (!rejected && results[i].Count != int64(ops[i].Key[0])) {
				t.Fatalf("mask %05b op %d: got %+v", mask, i, results[i])
			}
		}
		if strings.Join(decided, ",") != strings.Join(want, ",") || (len(want) > 0) != (calls == 1) || calls > 1 {
			t.Fatalf("mask %05b: decided %v in %d calls; want %v in one", mask, decided, calls, want)
		}
	}
}

// BenchmarkDoExcept is a batch of 16 ops none of which is rejected: it allocates nothing.
func BenchmarkDoExcept(b *testing.B) {
	ops := make([]Op, 16)
	results := make([]Result, 16)
	pass := func(int) error { return nil }
	do := func(context.Context, []Op, []Result) {}
	b.ReportAllocs()
	for b.Loop() {
		DoExcept(context.Background(), ops, results, pass, do)
	}
}

func TestCheckStampsTheSlotOnce(t *testing.T) {
	op := Op{Kind: Incr, Key: "user:{42}:logins", Window: 60_000, Buckets: 10, N: 1}
	if op.Checked() {
		t.Fatal("a fresh op reports checked")
	}
	if err := (Limits{}).Check(&op); err != nil || !op.Checked() || op.Slot != hashslot.Of("42") {
		t.Fatalf("Check: err %v, checked %v, slot %d; want slot %d", err, op.Checked(), op.Slot, hashslot.Of("42"))
	}
	bad := op
	bad.N = 0
	if err := (Limits{}).Check(&bad); !errors.Is(err, ErrBadN) || bad.Checked() {
		t.Fatalf("Check of n 0: err %v, checked %v; want ErrBadN, unchecked", err, bad.Checked())
	}
	unchecked := Op{Kind: Incr, Key: "", Window: 1000, Buckets: 10, N: 1}
	if err := (Limits{}).Ready(&unchecked); !errors.Is(err, ErrEmptyKey) {
		t.Fatalf("Ready of an unchecked bad op: %v; want ErrEmptyKey", err)
	}
}

// countingDecider decides every op at once, or later on a goroutine, as told.
type countingDecider struct{ later bool }

func (d countingDecider) Decide(_ context.Context, b *Batch) bool {
	if !d.later {
		fillCounts(b)
		return true
	}
	go func() {
		fillCounts(b)
		b.Done()
	}()
	return false
}

func fillCounts(b *Batch) {
	for i := range b.Ops {
		b.Results[i].Count = int64(i + 1)
	}
}

func TestDoAndStartWaitForEitherWay(t *testing.T) {
	for _, later := range []bool{false, true} {
		ops := make([]Op, 3)
		res := make([]Result, 3)
		Do(context.Background(), countingDecider{later}, ops, res)
		if res[2].Count != 3 {
			t.Fatalf("Do (later %v): results %+v", later, res)
		}
		done := make(chan struct{})
		res = make([]Result, 3)
		Start(context.Background(), countingDecider{later}, &Batch{Ops: ops, Results: res, Done: func() { close(done) }})
		<-done
		if res[2].Count != 3 {
			t.Fatalf("Start (later %v): results %+v", later, res)
		}
	}
}

func BenchmarkDo(b *testing.B) {
	ops := []Op{{Kind: Incr, Key: "k", Window: 60_000, Buckets: 10, N: 1}}
	res := make([]Result, 1)
	for _, later := range []bool{false, true} {
		b.Run(fmt.Sprintf("later=%v", later), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Do(context.Background(), countingDecider{later}, ops, res)
			}
		})
	}
}

func TestDoAtOnceAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop what it is given")
	}
	ops := []Op{{Kind: Incr, Key: "k", Window: 60_000, Buckets: 10, N: 1}}
	res := make([]Result, 1)
	var d Decider = countingDecider{}
	if n := testing.AllocsPerRun(100, func() { Do(context.Background(), d, ops, res) }); n > 0 {
		t.Errorf("Do of a batch decided at once: %v allocations; want none", n)
	}
}
