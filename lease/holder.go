package lease

import (
	"sync/atomic"
	"time"
)

// Holder is the claimant's side: it counts, per heartbeat round, the voters that granted
// each partition, and holds a partition until Duration after the send time of the latest
// round a majority granted it. Begin, Grant, Drop and Expire are serialized by the
// caller (Keeper); Until and DecideUntil may be read concurrently.
type Holder struct {
	cfg    Config
	until  []atomic.Int64 // per partition: the lease's end, a time.Duration on the Keeper's Clock (0: not held); atomic, as Until is read without the Keeper's lock
	from   []uint64       // per partition: grants of rounds before this are ignored (after a Drop)
	rounds map[uint64]*round
}

type round struct {
	sentAt   time.Duration
	quorum   int
	voters   map[string]bool
	answered map[string]bool
	counts   []uint16
}

// NewHolder returns a Holder for partitions partitions, holding none.
func NewHolder(cfg Config, partitions int) *Holder {
	return &Holder{cfg: cfg.WithDefaults(), until: make([]atomic.Int64, partitions),
		from: make([]uint64, partitions), rounds: map[uint64]*round{}}
}

// Begin records round n, sent at sentAt to voters, whose majority grants count.
func (h *Holder) Begin(n uint64, sentAt time.Duration, voters []string) {
	r := &round{sentAt: sentAt, quorum: len(voters)/2 + 1, voters: make(map[string]bool, len(voters)),
		answered: map[string]bool{}, counts: make([]uint16, len(h.until))}
	for _, v := range voters {
		r.voters[v] = true
	}
	h.rounds[n] = r
}

// Grant counts the partitions voter granted in round n. A partition granted by a
// majority of the round's voters is held until the round's send time plus Duration.
// Grants from non-voters, repeated answers and unknown rounds count for nothing.
func (h *Holder) Grant(n uint64, voter string, granted Set) {
	r := h.rounds[n]
	if r == nil || !r.voters[voter] || r.answered[voter] {
		return
	}
	r.answered[voter] = true
	end := r.sentAt + h.cfg.Duration
	granted.Each(func(p int) {
		if p >= len(r.counts) || n < h.from[p] {
			return
		}
		r.counts[p]++
		if int(r.counts[p]) == r.quorum && h.Until(p) < end {
			h.until[p].Store(int64(end))
		}
	})
}

// Drop stops holding p at once, and ignores grants of rounds before next (sent while p
// was still claimed).
func (h *Holder) Drop(p int, next uint64) {
	h.until[p].Store(0)
	h.from[p] = next
}

// Expire forgets rounds sent before now minus Duration: their grants could no longer
// extend any lease.
func (h *Holder) Expire(now time.Duration) {
	for n, r := range h.rounds {
		if r.sentAt+h.cfg.Duration <= now {
			delete(h.rounds, n)
		}
	}
}

// Until is the end of p's lease (the Keeper's Clock; 0 or past: not held).
func (h *Holder) Until(p int) time.Duration {
	if p < 0 || p >= len(h.until) {
		return 0
	}
	return time.Duration(h.until[p].Load())
}

// DecideUntil is when the holder must stop deciding p: Grace before its lease ends, so
// that it can persist what it decided before anyone else can be granted p.
func (h *Holder) DecideUntil(p int) time.Duration {
	u := h.Until(p)
	if u == 0 {
		return 0
	}
	return u - h.cfg.Grace
}
