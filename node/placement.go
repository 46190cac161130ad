package node

import (
	"github.com/leapcount/leapcount/cluster"
	"github.com/leapcount/leapcount/ring"
)

// Placements --placement accepts.
const (
	PlacementMatching   = "matching"   // the default: ring.PlacementMatching once every member supports it
	PlacementConsistent = "consistent" // ring.Consistent always, as releases before matching place
)

// placementFor is the ring Config for members: ring.PlacementMatching when every one
// advertises it, otherwise ring.Consistent, the placement of releases before it (which
// ignore the feature bit and always place so). A rolling upgrade thus keeps one
// placement on every node: the old one while any old member is in the ring, the new
// one once the last is replaced, switched like any other ring change (each node
// decides from the same members, within gossip's delay). --placement consistent keeps
// a node, and so its cluster, on the old placement. partitions is --partitions: a
// count other than the default always places by matching (no release before matching
// shares such a cluster's label: clusterLabel), and --placement consistent is refused
// with it (Config.Validate).
func placementFor(members []cluster.Member, partitions int) ring.Config {
	if partitions != ring.DefaultPartitionCount {
		return ring.Config{PartitionCount: partitions}
	}
	for _, m := range members {
		if m.Features&featureMatching == 0 {
			return ring.Consistent
		}
	}
	return ring.Config{}
}
