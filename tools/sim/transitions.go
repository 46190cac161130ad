package sim

// checkTransitions fails the run once any node's owner met an event its partition
// state machine did not expect (owner.ErrUnknownTransition): a flaw in the owner's
// bookkeeping even where no count went wrong.
func (w *world) checkTransitions() {
	if w.unknownSeen {
		return
	}
	for _, n := range w.nodes {
		if n.owner == nil {
			continue
		}
		if c := n.owner.UnknownTransitions(); c > 0 {
			w.unknownSeen = true
			w.fail("%s: %d partition state machine events unknown in their state (its log says which)", n.name, c)
			return
		}
	}
}
