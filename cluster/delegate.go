package cluster

import (
	"log/slog"
	"sync/atomic"

	"github.com/hashicorp/memberlist"
)

// events is memberlist's EventDelegate and ConflictDelegate. memberlist calls it with
// its node lock held, so it copies what it needs from the node at once (the Node is
// memberlist's own, rewritten later under that lock) and returns quickly, never
// calling back into memberlist.
type events struct {
	tab *table
	log *slog.Logger
}

func (e *events) NotifyJoin(n *memberlist.Node)   { e.tab.set(e.member(n)) }
func (e *events) NotifyUpdate(n *memberlist.Node) { e.tab.set(e.member(n)) }
func (e *events) NotifyLeave(n *memberlist.Node)  { e.tab.gone(e.member(n)) }

func (e *events) NotifyConflict(existing, other *memberlist.Node) {
	e.log.Warn("another node claims a member name in use", "name", existing.Name,
		"addr", existing.Address(), "other_addr", other.Address())
}

// member converts a node that is present; gone turns it into left or dead.
func (e *events) member(n *memberlist.Node) Member {
	m := Member{Name: n.Name, Addr: n.Address(), State: StateAlive}
	md, err := decodeMeta(n.Meta)
	if err != nil {
		// A node of another program or release on our gossip port: list it, but
		// without an RPC address it never serves (Member.Serving).
		e.log.Warn("unreadable node metadata", "name", n.Name, "addr", m.Addr, "err", err)
		return m
	}
	m.RPCAddr, m.ClientAddr, m.Zone, m.Incarnation, m.Features = md.rpcAddr, md.clientAddr, md.zone, md.incarnation, md.features
	if md.leaving {
		m.State = StateLeaving
	}
	return m
}

// delegate is memberlist's Delegate: NodeMeta, and the push-pull state that carries
// members' versions (versions.go); leapcount sends no user messages.
type delegate struct {
	meta    meta        // fixed for the life of the Cluster, except leaving
	leaving atomic.Bool // read by NodeMeta on memberlist's goroutines
	state   []byte      // this member's version state (encodeVersion), fixed
	heard   *versions
	known   func(name string) bool // whether name is a member (its version is kept)
}

func (d *delegate) NodeMeta(limit int) []byte {
	m := d.meta
	m.leaving = d.leaving.Load()
	b := m.encode()
	if len(b) > limit {
		// Unreachable: Validate caps RPCAddr well below memberlist's limit, and
		// memberlist panics on oversized metadata, so degrade instead.
		return nil
	}
	return b
}

func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return d.state }

// MergeRemoteState keeps the version a peer sent, if it is well formed and names a
// member; anything else is ignored.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {
	name, version, err := decodeVersion(buf)
	if err == nil && d.heard != nil && d.known(name) {
		d.heard.set(name, version)
	}
}
