package ring

import (
	"encoding/binary"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// matching places partitions by PlacementMatching: partition-proposing deferred
// acceptance (Gale-Shapley with capacities). Each free partition proposes to the best
// member it has not proposed to yet; a member holding more than limit partitions
// rejects the one it ranks lowest, which proposes on. Partitions and members rank each
// other by one rendezvous score, so a member prefers the partitions that prefer it.
//
// The stable matching this finds is unique for strict preferences, so the order in
// which partitions propose does not change the result: every node computes the same
// placement from the same members. A join takes the partitions that rank the newcomer
// first (as rendezvous hashing alone would), and moves others only where a member's
// bound or its freed room changes (TestPlacementAtScale logs how many).
//
// members is sorted and unique; limit·len(members) ≥ partitions (Config.Validate and
// MaxShare see to it).
func matching(members []Member, partitions, limit int) ([]int32, error) {
	if limit*len(members) < partitions {
		return nil, fmt.Errorf("ring: %d members of at most %d partitions cannot hold %d", len(members), limit, partitions)
	}
	seeds := make([]uint64, len(members))
	for i, m := range members {
		seeds[i] = xxhash.Sum64String(m.Name)
	}
	owners := make([]int32, partitions)
	last := make([]choice, partitions) // each partition's latest proposal
	held := make([]partitionHeap, len(members))
	free := make([]int32, partitions)
	for p := range free {
		free[p] = int32(partitions - 1 - p)
		last[p] = choice{member: -1}
	}
	for len(free) > 0 {
		p := free[len(free)-1]
		free = free[:len(free)-1]
		c := nextChoice(seeds, p, last[p])
		last[p] = c
		h := &held[c.member]
		h.push(held1{score: c.score, partition: p})
		if len(*h) > limit {
			free = append(free, h.pop().partition)
		}
	}
	for m, h := range held {
		for _, e := range h {
			owners[e.partition] = int32(m)
		}
	}
	return owners, nil
}

// choice is a partition's proposal: a member and their score.
type choice struct {
	score  uint64
	member int32 // -1 before the first proposal
}

// better orders choices: higher score first, then lower member index, so preferences
// are strict even if two scores collide.
func (c choice) better(d choice) bool {
	return c.score > d.score || c.score == d.score && c.member < d.member
}

// nextChoice is partition p's best member ranked below after (or its best of all when
// after.member is -1). Scores are recomputed rather than kept: most partitions propose
// once or twice, and a table of every score would take partitions × members words.
func nextChoice(seeds []uint64, p int32, after choice) choice {
	best := choice{member: -1}
	for i, seed := range seeds {
		c := choice{score: score(seed, p), member: int32(i)}
		if after.member >= 0 && !after.better(c) {
			continue
		}
		if best.member < 0 || c.better(best) {
			best = c
		}
	}
	return best
}

// score is the rendezvous hash of a member (its name's hash) and a partition.
func score(seed uint64, p int32) uint64 {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	binary.LittleEndian.PutUint32(b[8:], uint32(p))
	return xxhash.Sum64(b[:])
}

// held1 is a partition a member holds, with its score.
type held1 struct {
	score     uint64
	partition int32
}

// worse orders what a member holds: lower score first, then higher partition.
func (a held1) worse(b held1) bool {
	return a.score < b.score || a.score == b.score && a.partition > b.partition
}

// partitionHeap is a min-heap of held partitions, the member's least preferred on
// top. It is typed rather than container/heap's, which boxes every element it pushes.
type partitionHeap []held1

func (h *partitionHeap) push(e held1) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s[i].worse(s[parent]) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

func (h *partitionHeap) pop() held1 {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l, least := 2*i+1, i
		if l < n && s[l].worse(s[least]) {
			least = l
		}
		if r := l + 1; r < n && s[r].worse(s[least]) {
			least = r
		}
		if least == i {
			break
		}
		s[i], s[least] = s[least], s[i]
		i = least
	}
	*h = s
	return top
}
