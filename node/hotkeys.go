package node

import (
	"context"
	"sync"
	"time"

	"github.com/leapcount/leapcount/cluster"
	"github.com/leapcount/leapcount/hotkeys"
	"github.com/leapcount/leapcount/internal/peerrpc"
)

// HotKeysView is the body of GET /v1/hotkeys (the status and hotkeys commands read it).
type HotKeysView struct {
	Node string `json:"node"`
	hotkeys.Report
	// Sliced lists the keys among Keys whose limits are being sliced here: this node
	// lent slices of them, or holds some (docs/guarantees.md, Limit slices).
	Sliced []string `json:"sliced,omitempty"`
}

// hotKeys reports the n keys decided here most often lately.
func (n *Node) hotKeys(top int) any {
	v := HotKeysView{Node: n.cfg.Name, Report: n.topKeys(top)}
	for _, k := range v.Keys {
		if k.Sliced {
			v.Sliced = append(v.Sliced, k.Key)
		}
	}
	return v
}

// topKeys is the n keys decided here most often lately, those being sliced here
// marked (this node lent slices of them, or holds some).
func (n *Node) topKeys(top int) hotkeys.Report {
	r := n.hot.Top(top, n.cfg.Now())
	sliced := n.owner.SlicedKeys()
	if n.borrower != nil {
		for _, k := range n.borrower.Keys() {
			sliced[k] = true
		}
	}
	for i := range r.Keys {
		r.Keys[i].Sliced = sliced[r.Keys[i].Key]
	}
	return r
}

// ClusterHotKeysView is the body of GET /v1/hotkeys?scope=cluster (hotkeys --cluster):
// every member's top keys, merged (hotkeys.Merge), and the members whose keys it lacks.
type ClusterHotKeysView struct {
	Node    string   `json:"node"`    // the member that asked the others and merged
	Members []string `json:"members"` // the members whose keys are in it, this one included
	hotkeys.ClusterReport
	Missing []MissingMember `json:"missing,omitempty"`
}

// MissingMember is a member whose keys a cluster report lacks, and why.
type MissingMember struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// clusterAskTimeout bounds how long a cluster report waits for any one member.
const clusterAskTimeout = 2 * time.Second

// clusterAskers bounds the members asked at once, so that a large cluster costs a
// fixed number of goroutines per report.
const clusterAskers = 16

// clusterHotKeys asks every member that decides keys (alive or leaving) for its top
// keys over rpc, at most clusterAskers at a time, and merges them with this node's. A
// member that cannot answer (a release before hot keys over rpc, unreachable, too
// slow) is listed in Missing, so a partial report never passes for a whole one.
func (n *Node) clusterHotKeys(ctx context.Context, top int) any {
	v := ClusterHotKeysView{Node: n.cfg.Name}
	reports := []hotkeys.Decided{{Node: n.cfg.Name, Report: n.topKeys(top)}}
	var ask []cluster.Member
	for _, m := range n.cluster.Members() {
		switch {
		case m.Name == n.cfg.Name || m.State != cluster.StateAlive && m.State != cluster.StateLeaving:
		case m.RPCAddr == "":
			v.Missing = append(v.Missing, MissingMember{m.Name, "its gossip metadata is unreadable"})
		case m.Features&featureHotKeys == 0:
			v.Missing = append(v.Missing, MissingMember{m.Name, "it runs a release that cannot tell its hot keys to others"})
		default:
			ask = append(ask, m)
		}
	}
	answers := make([]hotkeys.Report, len(ask))
	errs := make([]error, len(ask))
	ctx, cancel := context.WithTimeout(ctx, clusterAskTimeout)
	defer cancel()
	sem := make(chan struct{}, clusterAskers)
	var wg sync.WaitGroup
	for i, m := range ask {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var flags uint64
			if m.Features&featureHotKeysSliced != 0 {
				flags = hotkeys.FlagSliced
			}
			answers[i], errs[i] = peerrpc.HotKeys{C: n.rpcClient}.Top(ctx, m.RPCAddr, top, flags)
		}()
	}
	wg.Wait()
	for i, m := range ask {
		if errs[i] != nil {
			v.Missing = append(v.Missing, MissingMember{m.Name, errs[i].Error()})
			continue
		}
		reports = append(reports, hotkeys.Decided{Node: m.Name, Report: answers[i]})
	}
	for _, r := range reports {
		v.Members = append(v.Members, r.Node)
	}
	v.ClusterReport = hotkeys.Merge(reports, top)
	return v
}
