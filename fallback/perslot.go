package fallback

// perSlot holds a value per hash slot. Outside a Cluster every counter is in slot 0, and
// a key flood's batch asked a map for it once per delta (BenchmarkNewBatch): then the
// value is a field.
type perSlot[T any] struct {
	one    T
	oneSet bool
	bySlot map[uint16]T // nil outside a Cluster
}

func newPerSlot[T any](cluster bool) perSlot[T] {
	if cluster {
		return perSlot[T]{bySlot: map[uint16]T{}}
	}
	return perSlot[T]{}
}

// get returns slot's value and whether one was set.
func (p *perSlot[T]) get(slot uint16) (T, bool) {
	if p.bySlot == nil {
		return p.one, p.oneSet
	}
	v, ok := p.bySlot[slot]
	return v, ok
}

func (p *perSlot[T]) set(slot uint16, v T) {
	if p.bySlot == nil {
		p.one, p.oneSet = v, true
		return
	}
	p.bySlot[slot] = v
}
