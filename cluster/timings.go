package cluster

import (
	"fmt"
	"time"

	"github.com/hashicorp/memberlist"
)

// Timings sets memberlist's failure detection and gossip pace. A zero field keeps
// memberlist's LAN default (DefaultLANConfig).
type Timings struct {
	ProbeInterval           time.Duration // how often each node probes a random peer
	ProbeTimeout            time.Duration // how long to wait for a probe's ack; below ProbeInterval
	GossipInterval          time.Duration // how often gossip is sent
	PushPullInterval        time.Duration // how often full state is exchanged with a random peer
	TCPTimeout              time.Duration // push/pull and join connection timeout
	GossipToTheDeadTime     time.Duration // how long dead nodes keep receiving gossip before being forgotten
	SuspicionMult           int           // suspicion timeout, in probe intervals (scaled by cluster size)
	SuspicionMaxTimeoutMult int           // upper bound of the suspicion timeout, as a multiple of it
}

// FastTimings suits tests on one machine: joins converge in a fraction of a second and
// a killed node is declared dead within about two seconds. Probe timeouts stay at
// 100ms so that a loaded machine running the race detector does not suspect healthy
// nodes.
func FastTimings() Timings {
	return Timings{
		ProbeInterval:           200 * time.Millisecond,
		ProbeTimeout:            100 * time.Millisecond,
		GossipInterval:          20 * time.Millisecond,
		PushPullInterval:        time.Second,
		TCPTimeout:              time.Second,
		GossipToTheDeadTime:     time.Second,
		SuspicionMult:           3,
		SuspicionMaxTimeoutMult: 2,
	}
}

func (t Timings) validate() []error {
	var errs []error
	durations := []struct {
		name string
		d    time.Duration
	}{
		{"ProbeInterval", t.ProbeInterval}, {"ProbeTimeout", t.ProbeTimeout},
		{"GossipInterval", t.GossipInterval}, {"PushPullInterval", t.PushPullInterval},
		{"TCPTimeout", t.TCPTimeout}, {"GossipToTheDeadTime", t.GossipToTheDeadTime},
	}
	for _, f := range durations {
		if f.d < 0 {
			errs = append(errs, fmt.Errorf("cluster: Timings.%s: negative %v", f.name, f.d))
		}
	}
	if t.SuspicionMult < 0 {
		errs = append(errs, fmt.Errorf("cluster: Timings.SuspicionMult: negative %d", t.SuspicionMult))
	}
	if t.SuspicionMaxTimeoutMult < 0 {
		errs = append(errs, fmt.Errorf("cluster: Timings.SuspicionMaxTimeoutMult: negative %d", t.SuspicionMaxTimeoutMult))
	}
	if t.ProbeTimeout > 0 && t.ProbeInterval > 0 && t.ProbeTimeout >= t.ProbeInterval {
		errs = append(errs, fmt.Errorf("cluster: Timings.ProbeTimeout: %v must be below ProbeInterval %v", t.ProbeTimeout, t.ProbeInterval))
	}
	return errs
}

// apply copies the non-zero fields onto a memberlist config.
func (t Timings) apply(mc *memberlist.Config) {
	setDuration(&mc.ProbeInterval, t.ProbeInterval)
	setDuration(&mc.ProbeTimeout, t.ProbeTimeout)
	setDuration(&mc.GossipInterval, t.GossipInterval)
	setDuration(&mc.PushPullInterval, t.PushPullInterval)
	setDuration(&mc.TCPTimeout, t.TCPTimeout)
	setDuration(&mc.GossipToTheDeadTime, t.GossipToTheDeadTime)
	if t.SuspicionMult > 0 {
		mc.SuspicionMult = t.SuspicionMult
	}
	if t.SuspicionMaxTimeoutMult > 0 {
		mc.SuspicionMaxTimeoutMult = t.SuspicionMaxTimeoutMult
	}
}

func setDuration(dst *time.Duration, d time.Duration) {
	if d > 0 {
		*dst = d
	}
}
