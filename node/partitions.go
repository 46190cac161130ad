package node

import (
	"fmt"
	"strconv"

	"github.com/leapcount/leapcount/ring"
)

// checkPartitions validates --partitions: 0 (the default) or a power of two from the
// default to one partition a slot.
func checkPartitions(n int) error {
	switch n {
	case 0, ring.DefaultPartitionCount, 2 * ring.DefaultPartitionCount, 4 * ring.DefaultPartitionCount:
		return nil
	}
	return &ConfigError{"partitions", fmt.Sprintf("%d: want %d, %d or %d", n,
		ring.DefaultPartitionCount, 2*ring.DefaultPartitionCount, 4*ring.DefaultPartitionCount)}
}

// partitions is the partition count the ring places (Config.Partitions, or the default).
func (c *Config) partitions() int {
	if c.Partitions == 0 {
		return ring.DefaultPartitionCount
	}
	return c.Partitions
}

// clusterLabel is the name this node gives its cluster on gossip and rpc: --cluster-name,
// and the partition count when it is not the default. Nodes that would place keys on
// different partitions thus refuse each other's packets and handshakes, as nodes of two
// named clusters do, rather than form one ring that disagrees on every owner; with the
// default count the label is the name alone, as releases before --partitions give it.
func (c *Config) clusterLabel() string {
	if c.partitions() == ring.DefaultPartitionCount {
		return c.ClusterName
	}
	return c.ClusterName + "#partitions=" + strconv.Itoa(c.partitions())
}
