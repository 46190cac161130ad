package respapi

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/leapcount/leapcount/hashslot"
)

// Cluster is what the Redis Cluster protocol needs from the node: who serves which
// hash slots, and where a cluster client must send a key.
type Cluster interface {
	// Topology is the slot map now.
	Topology() *Topology
	// Redirect reports the slot of key and, when a cluster client must send it to
	// another node, that node's address (host:port) and moved true. When this node
	// serves key, or cannot tell, moved is false and the op is decided here.
	Redirect(key []byte) (slot uint16, addr string, moved bool)
}

// Topology is a slot map, as CLUSTER SLOTS, SHARDS and NODES report it.
type Topology struct {
	Epoch  uint64        // changes whenever the map does
	Self   int           // index of this node in Nodes
	Nodes  []ClusterNode // every node serving slots, sorted by name
	Ranges []SlotRange   // every slot once, in order
}

// ClusterNode is one node of a Topology.
type ClusterNode struct {
	ID   string // 40 hex digits, stable for the node's name (see NodeID)
	Host string
	Port int
}

// SlotRange is slots First..Last (inclusive), served by Nodes[Node].
type SlotRange struct {
	First, Last int
	Node        int
}

// NodeID is the id a node of that name reports: 40 hex digits, as Redis Cluster ids
// look (the SHA-1 of the name), so the same name gives the same id on every node.
func NodeID(name string) string {
	sum := sha1.Sum([]byte(name))
	return hex.EncodeToString(sum[:])
}

var errClusterDisabled = errorf("ERR", "This instance has cluster support disabled")

// clusterCmd answers CLUSTER SLOTS, SHARDS, NODES, INFO, MYID and KEYSLOT.
func (s *Server) clusterCmd(c *client, args [][]byte) error {
	sub := strings.ToUpper(string(args[1]))
	if sub == "KEYSLOT" {
		if len(args) != 3 {
			return wrongArity("cluster|keyslot")
		}
		c.out.WriteInt(int(hashslot.Of(args[2])))
		return nil
	}
	if s.cfg.Cluster == nil {
		return errClusterDisabled
	}
	if len(args) != 2 {
		return errorf("ERR", "unknown subcommand or wrong number of arguments for '%s'. Try CLUSTER HELP.", args[1])
	}
	t := s.cfg.Cluster.Topology()
	switch sub {
	case "SLOTS":
		writeSlots(c, t)
	case "SHARDS":
		writeShards(c, t)
	case "NODES":
		c.out.WriteBulkString(nodesText(t))
	case "INFO":
		c.out.WriteBulkString(clusterInfoText(t))
	case "MYID":
		c.out.WriteBulkString(t.Nodes[t.Self].ID)
	default:
		return errorf("ERR", "unknown subcommand or wrong number of arguments for '%s'. Try CLUSTER HELP.", args[1])
	}
	return nil
}

func writeSlots(c *client, t *Topology) {
	c.out.WriteArray(len(t.Ranges))
	for _, r := range t.Ranges {
		n := t.Nodes[r.Node]
		c.out.WriteArray(3)
		c.out.WriteInt(r.First)
		c.out.WriteInt(r.Last)
		c.out.WriteArray(3)
		c.out.WriteBulkString(n.Host)
		c.out.WriteInt(n.Port)
		c.out.WriteBulkString(n.ID)
	}
}

func writeShards(c *client, t *Topology) {
	slots := make([][]int, len(t.Nodes))
	for _, r := range t.Ranges {
		slots[r.Node] = append(slots[r.Node], r.First, r.Last)
	}
	c.out.WriteArray(len(t.Nodes))
	for i, n := range t.Nodes {
		c.out.WriteArray(4)
		c.out.WriteBulkString("slots")
		c.out.WriteArray(len(slots[i]))
		for _, s := range slots[i] {
			c.out.WriteInt(s)
		}
		c.out.WriteBulkString("nodes")
		c.out.WriteArray(1)
		c.out.WriteArray(14)
		for _, kv := range [][2]string{{"id", n.ID}, {"endpoint", n.Host}, {"ip", n.Host}, {"role", "master"}, {"health", "online"}} {
			c.out.WriteBulkString(kv[0])
			c.out.WriteBulkString(kv[1])
		}
		c.out.WriteBulkString("port")
		c.out.WriteInt(n.Port)
		c.out.WriteBulkString("replication-offset")
		c.out.WriteInt(0)
	}
}

// nodesText is CLUSTER NODES: one line per node, "id host:port@cport flags master
// ping-sent pong-recv config-epoch link-state slot...".
func nodesText(t *Topology) string {
	ranges := make([][]string, len(t.Nodes))
	for _, r := range t.Ranges {
		rs := strconv.Itoa(r.First)
		if r.Last != r.First {
			rs += "-" + strconv.Itoa(r.Last)
		}
		ranges[r.Node] = append(ranges[r.Node], rs)
	}
	var b strings.Builder
	for i, n := range t.Nodes {
		flags := "master"
		if i == t.Self {
			flags = "myself,master"
		}
		fmt.Fprintf(&b, "%s %s:%d@%d %s - 0 0 %d connected", n.ID, n.Host, n.Port, n.Port, flags, t.Epoch%1_000_000_000)
		for _, r := range ranges[i] {
			b.WriteByte(' ')
			b.WriteString(r)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func clusterInfoText(t *Topology) string {
	assigned := 0
	for _, r := range t.Ranges {
		assigned += r.Last - r.First + 1
	}
	state := "ok"
	if assigned < hashslot.Count {
		state = "fail"
	}
	epoch := t.Epoch % 1_000_000_000
	return fmt.Sprintf("cluster_enabled:1\r\ncluster_state:%s\r\ncluster_slots_assigned:%d\r\ncluster_slots_ok:%d\r\n"+
		"cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:%d\r\ncluster_size:%d\r\n"+
		"cluster_current_epoch:%d\r\ncluster_my_epoch:%d\r\n", state, assigned, assigned, len(t.Nodes), len(t.Nodes), epoch, epoch)
}

// readonly answers READONLY and READWRITE: there are no replicas to read from, so
// both mean "as before".
func (s *Server) readonly(c *client, _ [][]byte) error {
	c.out.WriteString("OK")
	return nil
}

// moved returns the -MOVED error for an op on key when c must send it elsewhere.
func (s *Server) moved(c *client, key []byte) error {
	if !c.redirect {
		return nil
	}
	slot, addr, moved := s.cfg.Cluster.Redirect(key)
	if !moved {
		return nil
	}
	return errorf("MOVED", "%d %s", slot, addr)
}
