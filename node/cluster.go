package node

import (
	"github.com/leapcount/leapcount/internal/buildinfo"
)

// MemberView is one entry of GET /v1/cluster's members.
type MemberView struct {
	Name        string `json:"name"`
	Addr        string `json:"addr"` // gossip address
	State       string `json:"state"`
	Version     string `json:"version,omitempty"` // its build version, once gossip has told it
	RPC         string `json:"rpc,omitempty"`
	Partitions  int    `json:"partitions"` // partitions this member owns in this node's ring
	Leased      int    `json:"leased"`     // of all partitions, those this node's vote grants it now
	Incarnation string `json:"incarnation,omitempty"`
	Voter       bool   `json:"voter"`          // its lease grants count towards this node's majorities
	Zone        string `json:"zone,omitempty"` // its --zone
}

// ClusterView is the body of GET /v1/cluster (the status command reads it).
type ClusterView struct {
	Self       string       `json:"self"`
	Version    string       `json:"version"` // this node's (buildinfo)
	Members    []MemberView `json:"members"`
	Epoch      string       `json:"epoch"` // this node's ring epoch: equal on every node once they agree
	Partitions int          `json:"partitions"`
	Placement  string       `json:"placement,omitempty"` // this node's ring's placement: "matching", or "consistent" while a member asks for it
	Ready      bool         `json:"ready"`
	// AwaitingSeeds: this node was given seeds and none has taken it in yet;
	// JoinFailures counts the joins that failed so far (cluster.JoinFailures).
	AwaitingSeeds bool   `json:"awaiting_seeds,omitempty"`
	JoinFailures  uint64 `json:"join_failures,omitempty"`
	Counters      int    `json:"counters"`           // held in memory by this node
	Owned         int    `json:"owned"`              // partitions this node's ring gives it
	Held          int    `json:"held"`               // of those, the ones it decides now (it holds their lease)
	HandingOn     int    `json:"handing_on"`         // partitions whose counters are on their way to or from this node
	Unwritten     int    `json:"unwritten"`          // counters whose deltas this node has not written to Redis yet
	LagMs         int64  `json:"writebehind_lag_ms"` // age of the oldest write-behind batch Redis has not confirmed (0: none)
	Status        string `json:"status"`             // "ok", or "degraded" while Redis is configured and down
	Redis         string `json:"redis"`              // "off" (no --redis), "up" or "down"
	// RedisReplicasBehind: fewer replicas than --redis-wait-replicas acknowledge this
	// node's writes (Redis is then "down"); absent otherwise.
	RedisReplicasBehind bool         `json:"redis_replicas_behind,omitempty"`
	Security            SecurityView `json:"security"`
	Clock               ClockView    `json:"clock"` // other clocks against this node's counters' clock (clock.go)
}

// SecurityView says what protects the cluster plane, for operators to check at a glance.
type SecurityView struct {
	RPC     string `json:"rpc"`     // peerauth's mode: "certificates", "key" or "none"
	Gossip  string `json:"gossip"`  // "encrypted" (--gossip-key) or "open"
	Cluster string `json:"cluster"` // --cluster-name
	Refused int64  `json:"refused"` // rpc connections refused by the handshake so far
}

func (n *Node) clusterInfo() any {
	v := ClusterView{Self: n.cfg.Name, Version: buildinfo.Read().Version, Members: n.memberView(), Ready: n.Ready(), Counters: n.store.Len(),
		Status: "ok", Redis: n.redisStatus(),
		Security: SecurityView{RPC: string(n.rpcAuth), Gossip: "open", Cluster: n.cfg.ClusterName, Refused: n.rpcSrv.Refused()}}
	if len(n.cfg.GossipKeys) > 0 {
		v.Security.Gossip = "encrypted"
	}
	if !n.joined.Load() {
		v.AwaitingSeeds, v.JoinFailures = true, n.cluster.JoinFailures()
	}
	if v.Redis == "down" {
		v.Status = "degraded"
		v.RedisReplicasBehind = n.redis.ReplicasBehind()
	}
	v.Clock = n.clockView()
	v.Owned, v.Held = n.Holding()
	v.HandingOn = n.HandingOn()
	v.Unwritten = n.Unwritten()
	lag, _ := n.owner.WriteBehindStats()
	v.LagMs = lag.Milliseconds()
	if rg := n.router.Ring(); rg != nil {
		v.Epoch = epochString(rg)
		v.Partitions = rg.PartitionCount()
		v.Placement = rg.Config().Placement.String()
	}
	return v
}
