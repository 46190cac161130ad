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
	Counters   int      `json:"counters"` // held in memory by this node
	Owned      int      `json:"owned"`    // partitions this node's ring gives it
	Held       int      `json:"held"`     // of those, the ones it decides now (it holds their lease)
	Status     string   `json:"status"`   // "ok", or "degraded" while Redis is configured and down
	Redis      string   `json:"redis"`    // "off" (no --redis), "up" or "down"
}

func (n *Node) clusterInfo() any {
	v := clusterView{Self: n.cfg.Name, Members: n.memberView(), Ready: n.Ready(), Counters: n.store.Len(),
		Status: "ok", Redis: n.redisStatus()}
	if v.Redis == "down" {
		v.Status = "degraded"
	}
	v.Owned, v.Held = n.Holding()
	if rg := n.router.Ring(); rg != nil {
		v.Epoch = epochString(rg)
		v.Partitions = rg.PartitionCount()
	}
	return v
}
