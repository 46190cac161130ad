//go:build chaos

package chaosdocker

import (
	"testing"
	"time"
)

const (
	warmup = 3 * time.Second // load before the fault
	settle = 2 * time.Second // load after the cluster has recovered
	// pastDetection is how long a node stays killed, frozen or cut off: failure
	// detection declares it dead in about 5 s and its leases (3 s) run out, so its
	// partitions move (docs/guarantees.md: ≈5–8 s).
	pastDetection = 12 * time.Second
	// healBound bounds how long after a cut heals the three nodes are one cluster again.
	healBound = 30 * time.Second
)

// scenario is one fault on a fresh cluster; fault runs with the load going on and sets
// what the check allows.
type scenario struct {
	name      string
	overrides []string // compose files of this directory, after docker-compose.yml
	fault     func(*run)
}

var scenarios = []scenario{
	{"kill", nil, killOwner},
	{"pause", nil, pauseOwner},
	{"partition", nil, cutOwner},
	{"redis", nil, redisDown},
	{"redis-lost", nil, redisLost},
	{"join", nil, joinAndLeave},
	{"restart", nil, rollingRestart},
	{"skew", []string{"skew.yml"}, skewedClock},
}

// TestContainerChaos runs every scenario on its own cluster and prints the table.
func TestContainerChaos(t *testing.T) {
	var rows []row
	defer func() { t.Logf("\n%s", table(rows)) }()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			c := startCluster(t, sc.overrides...)
			r := begin(t, sc.name, c)
			r.hold(warmup)
			sc.fault(r)
			rows = append(rows, r.finish())
		})
	}
}
