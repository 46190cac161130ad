package benchharness

import (
	"context"
	"fmt"

	lg "github.com/leapcount/leapcount/tools/loadgen"
)

// The hot-key section (issue 45): one counter's allows sent through all three nodes of a
// cluster at once, against spread keys through the same nodes, and against the same hot
// key through three nodes that do not ask for limit slices. With --slices, a node that
// forwards a counter's allows often decides them itself from a slice its owner lent it;
// spread keys forward two ops in three.

// oneKey is the hot-key sides' key distribution: a single counter.
var oneKey = keySpec{kind: "hot", n: 1}

// runHotKey measures the hot-key groups: HTTP allow and RESP SW.ALLOW, unpipelined, the
// load generator's connections spread over the three nodes.
func (h *harness) runHotKey(ctx context.Context) ([]*groupResult, error) {
	h.logf("starting three nodes with --slices and three without")
	sliced, err := h.startNodes("sliced", 3, nodeOpts{extra: []string{"--slices"}})
	if err != nil {
		return nil, err
	}
	defer h.procs.stopSome(procsOf(sliced)...)
	plain, err := h.startNodes("plain", 3, nodeOpts{})
	if err != nil {
		return nil, err
	}
	defer h.procs.stopSome(procsOf(plain)...)
	var out []*groupResult
	for _, fe := range hotKeyFrontEnds {
		g := &group{id: "hotkey/" + fe.id, title: "one hot key through three nodes, " + fe.name + ", unpipelined",
			mode: "unpinned", pipeline: 1, keys: uniform, baseline: "hot-spread-" + fe.id,
			sides: []*side{
				fe.side("hot-sliced-"+fe.id, fe.name+", one key, --slices", sliced, "hs"+fe.id+":", &oneKey),
				fe.side("hot-spread-"+fe.id, fe.name+", spread keys, --slices", sliced, "hu"+fe.id+":", nil),
				fe.side("hot-plain-"+fe.id, fe.name+", one key, no slices", plain, "hp"+fe.id+":", &oneKey),
			}}
		res, err := h.runGroup(ctx, g)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

// hotKeyFrontEnd is one front end's allow.
type hotKeyFrontEnd struct {
	id, name, command string
	proto             lg.Proto
	request           lg.Request
	addr              func(n *nodeServer) string
}

var hotKeyFrontEnds = []hotKeyFrontEnd{
	{id: "http", name: "HTTP allow", command: fmt.Sprintf(`POST /v1/allow {"key":"<key>","window":"60s","limit":%s}`, allowLimit),
		proto: lg.HTTP, request: lg.HTTPPost("/v1/allow", `{"key":"`, httpAllowBody), addr: func(n *nodeServer) string { return n.http }},
	{id: "resp", name: "RESP SW.ALLOW", command: "SW.ALLOW <key> 60s " + allowLimit,
		proto: lg.RESP, request: swAllow, addr: func(n *nodeServer) string { return n.resp }},
}

// side is the front end's side sending through every node of nodes.
func (fe hotKeyFrontEnd) side(id, name string, nodes []*nodeServer, prefix string, keys *keySpec) *side {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = fe.addr(n)
	}
	return &side{id: id, name: name, command: fe.command, addrs: addrs, proto: fe.proto, prefix: prefix,
		servers: procsOf(nodes), keys: keys, request: fe.request}
}
