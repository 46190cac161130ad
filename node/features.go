package node

// Feature bits a node advertises in its gossip metadata (cluster.Config.Features), so
// that its peers use what it supports and nothing a release before it would refuse.
const (
	// featureMatching: this node places partitions by ring.PlacementMatching when every
	// member of the ring does (placementFor).
	featureMatching uint8 = 1 << 0
	// featureHotKeys: this node answers rpc.KindHotKeys (clusterHotKeys). A release
	// before it drops the connection that carries a message kind it does not know,
	// and the ops forwarded on it with the connection.
	featureHotKeys uint8 = 1 << 1
	// featureQuotaShare: this node answers rpc.KindQuotaShare (quotaSharer).
	featureQuotaShare uint8 = 1 << 2
	// featureSlices: this node lends slices of its counters' limits (counter.Borrow)
	// and takes them back (counter.Return). A release before it cannot read either op,
	// and drops the connection that carries it.
	featureSlices uint8 = 1 << 3
	// featureHotKeysSliced: this node reads hotkeys.FlagSliced in a KindHotKeys
	// request and marks its keys being sliced. A release before it finds the request
	// malformed.
	featureHotKeysSliced uint8 = 1 << 4
)

// features are the bits this node advertises.
func (n *Node) features() uint8 {
	f := featureHotKeys | featureQuotaShare | featureSlices | featureHotKeysSliced
	if n.cfg.Placement != PlacementConsistent {
		f |= featureMatching
	}
	return f
}
