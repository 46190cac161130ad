package node

// member is one entry of GET /v1/cluster's members.
type member struct {
	Name        string `json:"name"`
	Addr        string `json:"addr"` // gossip address
	State       string `json:"state"`
	RPC         string `json:"rpc,omitempty"`
	Partitions  int    `json:"partitions"` // partitions this member owns in this node's ring
	Incarnation string `json:"incarnation,omitempty"`
	Voter       bool   `json:"voter"` // its lease grants count towards this node's majorities
}

// clusterView is the body of GET /v1/cluster.
type clusterView struct {
	Self       string   `json:"self"`
	Members    []member `json:"members"`
	Epoch      string   `json:"epoch"` // this node's ring epoch: equal on every node once they agree
	Partitions int      `json:"partitions"`
	Ready      bool     `json:"ready"`
	Counters   int      `json:"counters"`   // held in memory by this node
	Owned      int      `json:"owned"`      // partitions this node's ring gives it
	Held       int      `json:"held"`       // of those, the ones it decides now (it holds their lease)
	HandingOn  int      `json:"handing_on"` // partitions whose counters are on their way to or from this node
	Unwritten  int      `json:"unwritten"`  // counters whose deltas this node has not written to Redis yet
	Status     string   `json:"status"`     // "ok", or "degraded" while Redis is configured and down
	Redis      string   `json:"redis"`      // "off" (no --redis), "up" or "down"
	Security   security `json:"security"`
}

// security says what protects the cluster plane, for operators to check at a glance.
type security struct {
	RPC     string `json:"rpc"`     // peerauth's mode: "certificates", "key" or "none"
	Gossip  string `json:"gossip"`  // "encrypted" (--gossip-key) or "open"
	Cluster string `json:"cluster"` // --cluster-name
	Refused int64  `json:"refused"` // rpc connections refused by the handshake so far
}

func (n *Node) clusterInfo() any {
	v := clusterView{Self: n.cfg.Name, Members: n.memberView(), Ready: n.Ready(), Counters: n.store.Len(),
		Status: "ok", Redis: n.redisStatus(),
		Security: security{RPC: string(n.rpcAuth), Gossip: "open", Cluster: n.cfg.ClusterName, Refused: n.rpcSrv.Refused()}}
	if len(n.cfg.GossipKeys) > 0 {
		v.Security.Gossip = "encrypted"
	}
	if v.Redis == "down" {
		v.Status = "degraded"
	}
	v.Owned, v.Held = n.Holding()
	v.HandingOn = n.HandingOn()
	v.Unwritten = n.Unwritten()
	if rg := n.router.Ring(); rg != nil {
		v.Epoch = epochString(rg)
		v.Partitions = rg.PartitionCount()
	}
	return v
}
