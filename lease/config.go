package lease

import (
	"fmt"
	"time"
)

// Config times leases. Every node of a cluster must use the same values.
type Config struct {
	// Duration is how long a holder may decide after the heartbeat that a majority
	// granted (default 2s). Longer leases survive slower heartbeats; shorter ones let a
	// partition move sooner after its holder stops answering.
	Duration time.Duration
	// Heartbeat is how often a node renews (default Duration/6: five renewals can fail
	// before a lease runs out).
	Heartbeat time.Duration
	// Grace is how long before its lease runs out a holder stops deciding, to write its
	// counters' deltas to Redis before another node may take the partition (default
	// Duration/6).
	Grace time.Duration
	// Drift bounds how much faster one node's clock may run than another's (default
	// 0.01: 1%). Grantors hold a grant for Duration*(1+Drift)+Margin.
	Drift float64
	// Margin is added to every grant a grantor keeps, for the time between a holder's
	// lease check and its decision (default 50ms).
	Margin time.Duration
	// DeadVoterAfter is how long a member must have been dead before it stops being a
	// voter (default 10s), so that a short pause does not shrink the voters.
	DeadVoterAfter time.Duration
	// Voters is the most voters a cluster keeps (default 5; odd): the rest of its
	// members hold leases without granting any, so that what a lease costs does not grow
	// with the fleet. A cluster of fewer than five members keeps at most three (all of
	// them, up to three); Voters.Target says how many.
	Voters int
}

// Defaults for Config.
const (
	DefaultDuration       = 2 * time.Second
	DefaultDrift          = 0.01
	DefaultMargin         = 50 * time.Millisecond
	DefaultDeadVoterAfter = 10 * time.Second
	DefaultVoters         = 5
)

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.Duration <= 0 {
		c.Duration = DefaultDuration
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = c.Duration / 6
	}
	if c.Grace <= 0 {
		c.Grace = c.Duration / 6
	}
	if c.Drift <= 0 {
		c.Drift = DefaultDrift
	}
	if c.Margin <= 0 {
		c.Margin = DefaultMargin
	}
	if c.DeadVoterAfter <= 0 {
		c.DeadVoterAfter = DefaultDeadVoterAfter
	}
	if c.Voters <= 0 {
		c.Voters = DefaultVoters
	}
	return c
}

// Validate names the first field, after defaults, that cannot work.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.Heartbeat*2 > c.Duration:
		return fmt.Errorf("lease: Heartbeat %v must be at most half of Duration %v", c.Heartbeat, c.Duration)
	case c.Grace*2 > c.Duration:
		return fmt.Errorf("lease: Grace %v must be at most half of Duration %v", c.Grace, c.Duration)
	case c.Drift >= 0.5:
		return fmt.Errorf("lease: Drift %v must be below 0.5", c.Drift)
	case c.Voters%2 == 0 || c.Voters > MaxMembers:
		return fmt.Errorf("lease: Voters %d must be odd and at most %d: an even set tolerates no more failures than the odd one below it", c.Voters, MaxMembers)
	}
	return nil
}

// hold is how long a grantor keeps a grant: longer than the holder can use it whatever
// the clocks' rates.
func (c Config) hold() time.Duration {
	return time.Duration(float64(c.Duration)*(1+c.Drift)) + c.Margin
}

// TargetVoters is how many voters a cluster of members members keeps: all of them up to
// three, then the largest odd number up to Voters.
func (c Config) TargetVoters(members int) int {
	if members <= 3 && c.Voters >= 3 {
		return members
	}
	t := min(members, c.Voters)
	if t > 0 && t%2 == 0 {
		t--
	}
	return t
}
