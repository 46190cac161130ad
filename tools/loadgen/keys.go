package loadgen

import (
	"math/rand/v2"
	"strconv"
)

// Keys gives each connection of a run its own stream of keys.
type Keys interface {
	// Stream is the stream of connection conn of conns.
	Stream(conn, conns int) KeyStream
	// String describes the distribution for a report ("uniform over 100000 keys").
	String() string
}

// KeyStream draws keys for one connection; it is not safe for concurrent use.
type KeyStream interface {
	// Next appends the next key to dst[:0] and returns it; false when the stream
	// is exhausted (only a Range ends).
	Next(dst []byte) ([]byte, bool)
}

// Uniform draws every key from Prefix+i, i uniform in [0, N): N = 100,000 is the
// "uniform keys" case, N = 100 the "hot keys" one. Seed fixes the draws.
type Uniform struct {
	Prefix string
	N      int
	Seed   uint64
}

func (u Uniform) Stream(conn, _ int) KeyStream {
	return &uniformStream{prefix: u.Prefix, n: uint64(u.N), rng: rand.New(rand.NewPCG(u.Seed, uint64(conn)))}
}

func (u Uniform) String() string { return "uniform over " + strconv.Itoa(u.N) + " keys" }

type uniformStream struct {
	prefix string
	n      uint64
	rng    *rand.Rand
}

func (s *uniformStream) Next(dst []byte) ([]byte, bool) {
	return strconv.AppendUint(append(dst[:0], s.prefix...), s.rng.Uint64N(s.n), 10), true
}

// Unique never repeats a key: Prefix, the connection and a sequence number, so every
// operation meets a counter the server has never seen ("new keys"). Runs that must not
// meet each other's keys give different prefixes.
type Unique struct{ Prefix string }

func (u Unique) Stream(conn, _ int) KeyStream {
	return &uniqueStream{prefix: u.Prefix + strconv.Itoa(conn) + ":"}
}

func (u Unique) String() string { return "a new key every operation" }

type uniqueStream struct {
	prefix string
	seq    uint64
}

func (s *uniqueStream) Next(dst []byte) ([]byte, bool) {
	s.seq++
	return strconv.AppendUint(append(dst[:0], s.prefix...), s.seq, 10), true
}

// Range gives each key Prefix+i, i in [0, N), exactly once across the connections
// (connection c takes c, c+conns, ...), then ends: loading N counters.
type Range struct {
	Prefix string
	N      int
}

func (r Range) Stream(conn, conns int) KeyStream {
	return &rangeStream{prefix: r.Prefix, next: conn, step: conns, end: r.N}
}

func (r Range) String() string { return "each of " + strconv.Itoa(r.N) + " keys once" }

type rangeStream struct {
	prefix          string
	next, step, end int
}

func (s *rangeStream) Next(dst []byte) ([]byte, bool) {
	if s.next >= s.end {
		return dst[:0], false
	}
	i := s.next
	s.next += s.step
	return strconv.AppendInt(append(dst[:0], s.prefix...), int64(i), 10), true
}
