package respapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/hashslot"
)

// halves is a two-node slot map: this node serves slots 0-8191, "other" the rest.
type halves struct{ otherAddr string }

func (h halves) Topology() *Topology {
	return &Topology{Epoch: 7, Self: 0,
		Nodes:  []ClusterNode{{ID: NodeID("self"), Host: "127.0.0.1", Port: 7000}, {ID: NodeID("other"), Host: "10.0.0.2", Port: 7001}},
		Ranges: []SlotRange{{First: 0, Last: 8191, Node: 0}, {First: 8192, Last: 16383, Node: 1}}}
}

func (h halves) Redirect(key []byte) (uint16, string, bool) {
	slot := hashslot.Of(key)
	return slot, h.otherAddr, slot >= 8192
}

// keyIn returns a key whose slot is in [lo, hi], and not skip.
func keyIn(lo, hi int, skip string) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("key:%d", i)
		if s := int(hashslot.Of(k)); s >= lo && s <= hi && k != skip && hashslot.Of(k) != hashslot.Of(skip) {
			return k
		}
	}
}

func TestClusterCommands(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Cluster = halves{"10.0.0.2:7001"} })
	c := ts.dial(t)
	self, other := NodeID("self"), NodeID("other")
	wantReply(t, c.do("CLUSTER", "SLOTS"), fmt.Sprintf("*[*[:0 :8191 *[$127.0.0.1 :7000 $%s]] *[:8192 :16383 *[$10.0.0.2 :7001 $%s]]]", self, other))
	wantReply(t, c.do("CLUSTER", "MYID"), "$"+self)
	wantReply(t, c.do("cluster", "keyslot", "{user1000}.following"), fmt.Sprintf(":%d", hashslot.Of("user1000")))
	nodes := c.do("CLUSTER", "NODES")
	for _, want := range []string{self + " 127.0.0.1:7000@7000 myself,master - 0 0 7 connected 0-8191\n",
		other + " 10.0.0.2:7001@7001 master - 0 0 7 connected 8192-16383\n"} {
		if !strings.Contains(nodes, want) {
			t.Errorf("CLUSTER NODES: %q lacks %q", nodes, want)
		}
	}
	if info := c.do("CLUSTER", "INFO"); !strings.Contains(info, "cluster_state:ok\r\n") || !strings.Contains(info, "cluster_known_nodes:2\r\n") {
		t.Errorf("CLUSTER INFO: %q", info)
	}
	shards := c.do("CLUSTER", "SHARDS")
	if !strings.HasPrefix(shards, "*[*[$slots *[:0 :8191] $nodes *[*[$id $"+self) {
		t.Errorf("CLUSTER SHARDS: %q", shards)
	}
	wantReply(t, c.do("READONLY"), "+OK")
	wantReply(t, c.do("READWRITE"), "+OK")
	wantReply(t, startServer(t, nil).dial(t).do("CLUSTER", "SLOTS"), "-ERR This instance has cluster support disabled")
}

// A cluster connection gets -MOVED for a key of another node, and keys of one
// transaction must share a slot; a plain connection gets every key decided.
func TestClusterRedirects(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Cluster = halves{"10.0.0.2:7001"} })
	mine, theirs := keyIn(0, 8191, ""), keyIn(8192, 16383, "")
	cc, plain := ts.dialCluster(t), ts.dial(t)
	wantReply(t, cc.do("SW.INCR", mine, "1m"), ":1")
	wantReply(t, cc.do("SW.INCR", theirs, "1m"), fmt.Sprintf("-MOVED %d 10.0.0.2:7001", hashslot.Of(theirs)))
	wantReply(t, plain.do("SW.INCR", theirs, "1m"), ":1")
	wantReply(t, plain.do("SW.INCR", theirs, "1m"), ":2") // the MOVED op changed nothing

	wantReply(t, cc.do("MULTI"), "+OK")
	wantReply(t, cc.do("SW.INCR", mine, "1m"), "+QUEUED")
	wantReply(t, cc.do("SW.INCR", keyIn(0, 8191, mine), "1m"), "-CROSSSLOT Keys in request don't hash to the same slot")
	wantReply(t, cc.do("EXEC"), "-EXECABORT Transaction discarded because of previous errors.")
	wantReply(t, cc.do("MULTI"), "+OK")
	wantReply(t, cc.do("SW.INCR", theirs, "1m"), fmt.Sprintf("-MOVED %d 10.0.0.2:7001", hashslot.Of(theirs)))
	wantReply(t, cc.do("EXEC"), "-EXECABORT Transaction discarded because of previous errors.")
	wantReply(t, cc.do("MULTI"), "+OK")
	wantReply(t, cc.do("SW.INCR", "{"+mine+"}a", "1m"), "+QUEUED")
	wantReply(t, cc.do("SW.INCR", "{"+mine+"}b", "1m"), "+QUEUED")
	wantReply(t, cc.do("EXEC"), "*[:1 :1]")
	wantReply(t, cc.do("SW.COUNT", mine, "1m"), ":1")
}
