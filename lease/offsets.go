package lease

import (
	"time"

	"github.com/leapcount/leapcount/internal/ntp"
)

// wall reads the counters' clock (0: none).
func (k *Keeper) wall() int64 {
	if k.cfg.Wall == nil {
		return 0
	}
	return k.cfg.Wall()
}

// Offsets are known for offsetKnownFor after the heartbeat that measured them, when it
// spent at most 2*offsetMaxErr on the wire.
const (
	offsetKnownFor = 10 * time.Second
	offsetMaxErr   = 250 * time.Millisecond
)

// noteOffset measures name's counters' clock against this node's from the exchange
// of req and rep, ended at wall (this node's counters' clock) and now. The caller
// holds mu.
func (k *Keeper) noteOffset(name string, req *Request, rep *Reply, wall int64, now time.Duration) {
	if req.SentAt == 0 || rep.ReceivedAt == 0 || wall == 0 || !k.known(name) {
		return
	}
	e := ntp.FromExchange(ntp.Ms(req.SentAt), ntp.Ms(rep.ReceivedAt), ntp.Ms(rep.RepliedAt), ntp.Ms(wall), now)
	if e.Err <= offsetMaxErr {
		k.offsets[name] = e
	}
}

// ClockOffsets is each member's counters' clock against this node's (Offset > 0: the
// member's is ahead), measured NTP-style on the heartbeats they exchanged within the
// last offsetKnownFor (package ntp). It decides nothing: it is for the operator
// (node's leapcount_clock_offset_seconds), since the counters' clocks place every op
// in its bucket.
func (k *Keeper) ClockOffsets() map[string]ntp.Estimate {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	out := map[string]ntp.Estimate{}
	for name, e := range k.offsets {
		if e.Known(now, offsetKnownFor, offsetMaxErr) {
			out[name] = e
		}
	}
	return out
}
