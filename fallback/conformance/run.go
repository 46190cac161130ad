package conformance

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/leaparray"
)

// Options shape a Run. Zero fields take the defaults.
type Options struct {
	Seed  uint64           // the random sequence; Run logs it
	Steps int              // operations to run; default 2000
	Keys  []string         // default DefaultKeys
	Specs []leaparray.Spec // default DefaultSpecs
	Start int64            // the clock at the first step (ms); default 1.7e12 + a random offset
	Every int              // compare every counter's snapshot every this many steps; default 250
	Phase int              // steps before another one or two shapes are picked; default 300
}

// DefaultKeys include the empty key, braces, a leading '=' and bytes that are not UTF-8.
var DefaultKeys = []string{"a", "b", "user:42", "", "{x}", "}{", "=a", "\x00\xff"}

// DefaultSpecs go from one bucket to the contract's 3600, and from 1 ms buckets to
// 1 s ones.
var DefaultSpecs = []leaparray.Spec{
	{WindowMs: 1000, Buckets: 10}, {WindowMs: 10, Buckets: 10}, {WindowMs: 7, Buckets: 1},
	{WindowMs: 60000, Buckets: 60}, {WindowMs: 3600000, Buckets: 3600}, {WindowMs: 100, Buckets: 4},
	{WindowMs: 3000, Buckets: 3},
}

// Run applies the same random operations to want and got and fails the test at the
// first answer or error that differs. It logs the seed; rerun with Options.Seed to
// reproduce.
func Run(t testing.TB, want, got Store, o Options) {
	t.Helper()
	o = o.withDefaults()
	t.Logf("conformance seed %d (%d steps)", o.Seed, o.Steps)
	r := &runner{t: t, want: want, got: got, o: o, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))}
	r.now = o.Start
	if r.now == 0 {
		r.now = 1_700_000_000_000 + r.rng.Int64N(1_000_000_000)
	}
	for r.step = 0; r.step < o.Steps; r.step++ {
		r.one()
		if (r.step+1)%o.Every == 0 {
			r.compareAll()
		}
	}
	r.compareAll()
}

func (o Options) withDefaults() Options {
	if o.Steps <= 0 {
		o.Steps = 2000
	}
	if len(o.Keys) == 0 {
		o.Keys = DefaultKeys
	}
	if len(o.Specs) == 0 {
		o.Specs = DefaultSpecs
	}
	if o.Every <= 0 {
		o.Every = 250
	}
	if o.Phase <= 0 {
		o.Phase = 300
	}
	return o
}

type runner struct {
	t         testing.TB
	want, got Store
	o         Options
	rng       *rand.Rand
	now       int64
	step      int
	active    []leaparray.Spec // the shapes of this phase
	history   []string         // the last operations, for the failure message
}

// check fails the test if the two answers (or errors) differ.
func (r *runner) check(op string, w, g any, werr, gerr error) {
	r.t.Helper()
	r.history = append(r.history, fmt.Sprintf("step %d now=%d %s -> %v", r.step, r.now, op, w))
	if len(r.history) > 30 {
		r.history = r.history[1:]
	}
	if werr == nil && gerr == nil && reflect.DeepEqual(w, g) {
		return
	}
	r.t.Fatalf("seed %d step %d: %s at now=%d:\n got %+v (err %v)\nwant %+v (err %v)\nlast operations:\n%s",
		r.o.Seed, r.step, op, r.now, g, gerr, w, werr, strings.Join(r.history, "\n"))
}

func (r *runner) compareAll() {
	r.t.Helper()
	for _, k := range r.o.Keys {
		for _, sp := range r.o.Specs {
			w, werr := r.want.Snapshot(k, sp, r.now)
			g, gerr := r.got.Snapshot(k, sp, r.now)
			r.check(fmt.Sprintf("snapshot(%q, %v) [full compare]", k, sp), norm(w), norm(g), werr, gerr)
		}
	}
}

// norm makes nil and empty snapshots compare equal.
func norm(bs []leaparray.Bucket) []leaparray.Bucket {
	if len(bs) == 0 {
		return nil
	}
	return bs
}
