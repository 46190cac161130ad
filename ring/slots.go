package ring

// SlotRange is a run of contiguous hash slots with one owner, as CLUSTER SLOTS lists
// them.
type SlotRange struct {
	First, Last int // inclusive
	Owner       Member
}

// SlotRanges lists every slot's owner as the fewest ranges, in slot order: adjacent
// partitions of one owner make one range. It is nil when the ring owns nothing.
func (r *Ring) SlotRanges() []SlotRange {
	if r.owners == nil {
		return nil
	}
	var out []SlotRange
	for p, o := range r.owners {
		first, last := r.SlotRange(p)
		if n := len(out); n > 0 && out[n-1].Owner.Name == r.members[o].Name {
			out[n-1].Last = last
			continue
		}
		out = append(out, SlotRange{First: first, Last: last, Owner: r.members[o]})
	}
	return out
}
