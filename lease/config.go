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
}

// Defaults for Config.
const (
	DefaultDuration       = 2 * time.Second
	DefaultDrift          = 0.01
	DefaultMargin         = 50 * time.Millisecond
	DefaultDeadVoterAfter = 10 * time.Second
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
	}
	return nil
}

// hold is how long a grantor keeps a grant: longer than the holder can use it whatever
// the clocks' rates.
func (c Config) hold() time.Duration {
	return time.Duration(float64(c.Duration)*(1+c.Drift)) + c.Margin
}
