package hotkeys

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sync"
)

// Config shapes a Sketch; zero fields take their defaults.
type Config struct {
	Capacity    int    // keys tracked (default 128)
	SampleEvery uint32 // one op in this many is counted, a power of two (default 16)
	PeriodMs    int64  // length of a period (default 10,000)
}

func (c Config) withDefaults() Config {
	if c.Capacity <= 0 {
		c.Capacity = 128
	}
	if c.SampleEvery == 0 || c.SampleEvery&(c.SampleEvery-1) != 0 {
		c.SampleEvery = 16
	}
	if c.PeriodMs <= 0 {
		c.PeriodMs = 10_000
	}
	return c
}

// Sketch is a node's hot keys. It is safe for concurrent use.
type Sketch struct {
	cfg  Config
	mask uint32

	mu        sync.Mutex
	cur, prev *summary
	curStart  int64 // ms; the current period began then
	prevStart int64 // ms; 0 when there is no previous period
}

// New returns an empty Sketch.
func New(cfg Config) *Sketch {
	cfg = cfg.withDefaults()
	return &Sketch{cfg: cfg, mask: cfg.SampleEvery - 1, cur: newSummary(cfg.Capacity), prev: newSummary(cfg.Capacity)}
}

// Observe notes one op on key at now (ms); only a sample of them is counted.
func (s *Sketch) Observe(key string, now int64) {
	// The runtime's per-thread generator: no lock and no shared cache line, so an op
	// that is not sampled costs a few nanoseconds on any number of cores.
	if rand.Uint32()&s.mask != 0 {
		return
	}
	s.mu.Lock()
	s.roll(now)
	s.cur.add(key)
	s.mu.Unlock()
}

// roll starts a new period when the current one is over: the current becomes the
// previous, and a period with no op in it leaves no previous.
func (s *Sketch) roll(now int64) {
	if s.curStart == 0 {
		s.curStart = now
		return
	}
	if now < s.curStart+s.cfg.PeriodMs {
		return
	}
	s.prev, s.cur = s.cur, s.prev
	s.prevStart = s.curStart
	if now >= s.curStart+2*s.cfg.PeriodMs {
		s.prevStart = 0 // the last period had no op: nothing of it to keep
	}
	s.cur.reset()
	s.curStart = now
}

// Hot is one key of Top.
type Hot struct {
	Key       string  `json:"key"`
	Ops       uint64  `json:"ops"`            // estimated ops in the span
	PerSecond float64 `json:"ops_per_second"` // Ops over the span
	// The true ops lie in [Low, High] (99% confidence; bounds.go): sampling's error and
	// the sketch's both. Error is the most Ops is off by either way, so that
	// Ops ± Error covers the range.
	Low   uint64 `json:"ops_low"`
	High  uint64 `json:"ops_high"`
	Error uint64 `json:"error"`
	// Sliced: the key's limit is being sliced on the node that reports it (it lent
	// slices of it, or holds some). The sketch leaves it false; the node marks it.
	Sliced bool `json:"sliced,omitempty"`

	counted, inherited uint64 // samples of it in the span, and how many may be another key's
}

// Report is the Sketch's top keys at a time.
type Report struct {
	SpanMs      int64  `json:"span_ms"`      // the time the counts cover
	SampleEvery uint32 `json:"sample_every"` // one op in this many was counted
	Keys        []Hot  `json:"keys"`         // by falling Ops
}

// Top returns the n most counted keys of the current and previous periods, at now.
func (s *Sketch) Top(n int, now int64) Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roll(now)
	rep := Report{SampleEvery: s.cfg.SampleEvery}
	if s.curStart == 0 {
		return rep
	}
	from := s.curStart
	counts := map[string]*Hot{}
	note := func(key string, count, err uint64) {
		h := counts[key]
		if h == nil {
			h = &Hot{Key: key}
			counts[key] = h
		}
		h.counted += count
		h.inherited += err
	}
	if s.prevStart != 0 {
		from = s.prevStart
		s.prev.each(note)
	}
	s.cur.each(note)
	rep.SpanMs = max(now-from, 1)
	for _, h := range counts {
		h.Ops = h.counted * uint64(s.cfg.SampleEvery)
		h.Low, h.High = opsRange(h.counted, h.inherited, s.cfg.SampleEvery)
		h.Error = max(h.Ops-min(h.Low, h.Ops), h.High-h.Ops)
		h.PerSecond = float64(h.Ops) * 1000 / float64(rep.SpanMs)
		rep.Keys = append(rep.Keys, *h)
	}
	rep.Keys = top(rep.Keys, n, func(h *Hot) *Hot { return h })
	return rep
}

// top sorts keys by falling ops (then by key, so that ties are stable) and keeps the
// first n.
func top[T any](keys []T, n int, hot func(*T) *Hot) []T {
	slices.SortFunc(keys, func(a, b T) int {
		ha, hb := hot(&a), hot(&b)
		if c := cmp.Compare(hb.Ops, ha.Ops); c != 0 {
			return c
		}
		return cmp.Compare(ha.Key, hb.Key)
	})
	return keys[:min(len(keys), max(n, 0))]
}
