package sim

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/history"
	"github.com/leapcount/leapcount/leaparray"
)

// Fresh keys and skewed clocks. The keys of keys.go have windows of 10 minutes, far
// longer than a run, so no owner ever skips a load on them but where Redis holds no
// stamp (owner/fresh.go): the skip's two other grounds, a partition decided without a
// break for longer than a window and a stamp older than one, are never reached. Fresh
// keys have a window of freshWindowMs and are drawn from a pool large enough that most
// of them lie idle for longer than that between two uses: their owner creates them
// without a load whenever it can, and a count answered from a counter created so while
// Redis held some of it in its window comes out short.
//
// The skip is judged by the counters' clock, which places each op in a bucket: a node
// whose clock is ahead of the others' places its counts in buckets the others reach
// only later. In two thirds of the runs with fresh keys, one of the nodes the run
// starts with has its counters' clock 8 to 10 s ahead of or behind the others' (past
// the skip's 5 s margin, freshMargin), and the others stay within the usual second.
//
// Half the runs with Redis have fresh keys, drawn from a stream of the seed's own, so
// that the other runs are the runs their seeds made before fresh keys were modelled.
const (
	freshWindowMs = 2000
	freshBuckets  = 2
	freshPool     = 1000
	freshClients  = 4
)

var freshSpec = leaparray.Spec{WindowMs: freshWindowMs, Buckets: freshBuckets}

func isFresh(key string) bool { return strings.HasPrefix(key, "fresh:") }

// specOf is key's window and buckets.
func specOf(key string) leaparray.Spec {
	if isFresh(key) {
		return freshSpec
	}
	return keySpec
}

// skew is a run's fresh keys and skewed clock, drawn from the seed alone.
type skew struct {
	on     bool          // the run has fresh keys
	node   int           // the index of the node whose clock is off (-1: none)
	offset time.Duration // how far off: + ahead of the others, - behind
	rng    *rand.Rand    // the fresh clients' draws
}

func drawSkew(opt Options) skew {
	r := rand.New(rand.NewPCG(opt.Seed, 0x5c3e3c10c))
	s := skew{node: -1, rng: r}
	if !opt.Redis || r.IntN(2) != 0 {
		return s
	}
	s.on = true
	if r.IntN(3) != 0 {
		s.node = r.IntN(opt.Nodes)
		s.offset = 8*time.Second + time.Duration(r.Int64N(int64(2*time.Second)))
		if r.IntN(2) == 0 {
			s.offset = -s.offset
		}
	}
	return s
}

// startFresh starts the fresh clients, when the run has fresh keys.
func (w *world) startFresh() {
	if !w.skew.on {
		return
	}
	w.trace("fresh keys: %d of a %d ms window", freshPool, freshWindowMs)
	for i := range freshClients {
		(&client{w: w, id: 100 + i, fresh: true}).next()
	}
}

// pickFresh chooses a fresh client's next op: mostly increments, some counts.
func (w *world) pickFresh() counter.Op {
	r := w.skew.rng
	key := fmt.Sprintf("fresh:%d", r.IntN(freshPool))
	if r.IntN(2) == 0 {
		return op(counter.Count, key, 0)
	}
	return op(counter.Incr, key, int64(1+r.IntN(3)))
}

// decided is what the check of fresh keys needs of where an op was decided: the bucket
// its decider's clock placed it in, and the newest bucket any op of its counter had
// been placed in by then, that op included (the counter acts at its newest bucket,
// in memory and in Redis alike).
type decided struct {
	ok         bool
	at, newest int64 // bucket indexes
}

// freshLog judges fresh keys' answers: each count must be
// at least what was acknowledged before the op was sent and falls in the window its
// counter had when the op was decided, less what faults may have lost or kept out of
// memory (keys.go's bounds, readLog's lack), and at most what was sent before its answer
// and not known to have failed, plus what faults may have counted twice.
type freshLog struct {
	newest map[string]int64 // per key: the newest bucket an op was placed in
	incrs  map[string][]freshIncr
	reads  map[string][]freshRead
}

type freshIncr struct {
	n          int64
	outcome    history.Outcome
	bucket     int64 // where it was placed (acknowledged ones only)
	start, end time.Duration
}

type freshRead struct {
	count      int64
	newest     int64
	start, end time.Duration
}

func newFreshLog() freshLog {
	return freshLog{newest: map[string]int64{}, incrs: map[string][]freshIncr{}, reads: map[string][]freshRead{}}
}

// place records that n decided op (without an error) now, and returns where.
func (f *freshLog) place(n *node, o *counter.Op) decided {
	at := freshSpec.Bucket(n.wall())
	newest, ok := f.newest[o.Key]
	if !ok || at > newest {
		newest = at
	}
	f.newest[o.Key] = newest
	return decided{ok: true, at: at, newest: newest}
}

// loaded notes that a node loads key from Redis at now (its counters' clock, ms): the
// load keeps what is in the window at now (fallback's windowOf), so a count decided
// later by a clock that stepped back acts at that window, as at its newest bucket.
func (f *freshLog) loaded(key string, now int64) {
	at := freshSpec.Bucket(now)
	if newest, ok := f.newest[key]; !ok || at > newest {
		f.newest[key] = at
	}
}

// record notes what a client was told of o, sent at start and decided as d.
func (f *freshLog) record(o counter.Op, res counter.Result, outcome history.Outcome, d decided, start, end time.Duration) {
	if o.Kind == counter.Incr {
		f.incrs[o.Key] = append(f.incrs[o.Key], freshIncr{n: o.N, outcome: outcome, bucket: d.at, start: start, end: end})
	}
	// An increment's count is not judged: one decided while Redis is down, on a counter
	// not in memory, counts from nothing (docs/guarantees.md, Redis down). A count is
	// not decided then.
	if o.Kind != counter.Count || outcome != history.OK || !d.ok {
		return
	}
	f.reads[o.Key] = append(f.reads[o.Key], freshRead{count: res.Count, newest: d.newest, start: start, end: end})
}

// check returns one line per key with an answer out of its bounds (its first).
func (f *freshLog) check(b history.Bounds, lack map[string]int64) []string {
	var out []string
	for _, key := range slices.Sorted(maps.Keys(f.reads)) {
		for _, rd := range f.reads[key] {
			var acked, possible int64
			for _, in := range f.incrs[key] {
				if in.outcome == history.OK && in.end < rd.start && in.bucket > rd.newest-freshBuckets {
					acked += in.n
				}
				if in.outcome != history.Failed && in.start <= rd.end {
					possible += in.n
				}
			}
			lo := acked - b.KeyLoss[key] - lack[key]
			hi := possible + b.KeyExtra[key]
			if rd.count < lo || rd.count > hi {
				out = append(out, fmt.Sprintf("%s: count answered %d at %.3fs, outside [%d, %d] (acknowledged before it in its window %d, allowed loss %d, lack %d; sent and not failed before its answer %d, extra %d)",
					key, rd.count, rd.end.Seconds(), lo, hi, acked, b.KeyLoss[key], lack[key], possible, b.KeyExtra[key]))
				break
			}
		}
	}
	return out
}
