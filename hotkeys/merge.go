package hotkeys

import "slices"

// Decided is a node's report, named.
type Decided struct {
	Node   string
	Report Report
}

// ClusterHot is one key of a cluster's merged report: the sum of what the nodes that
// decided it counted, and those nodes (more than one when its owner changed within the
// span, or when its limit is sliced: the nodes that decided ops from slices), Sliced
// when any of them marked it so.
type ClusterHot struct {
	Hot
	Nodes []string `json:"nodes"`
}

// ClusterReport is the nodes' reports merged.
type ClusterReport struct {
	SpanMs      int64        `json:"span_ms"`      // the longest span of the reports merged
	SampleEvery uint32       `json:"sample_every"` // the largest sampling interval among them
	Keys        []ClusterHot `json:"keys"`         // by falling Ops
}

// Merge sums the nodes' reports key by key and keeps the top n. A key is decided on its
// owner, and on the nodes that hold slices of its limit, so each node's top keys are
// the cluster's top keys of that node's partitions and of the slices it holds; a key
// decided on several nodes within the span (its owner changed, or it is sliced) is
// summed over them, which may leave out what one of them counted below its own top n.
// The bounds add up too: the true ops lie in [sum of Low, sum of High] wherever each
// node's do.
func Merge(reports []Decided, n int) ClusterReport {
	var out ClusterReport
	byKey := map[string]*ClusterHot{}
	var order []*ClusterHot
	for _, d := range reports {
		out.SpanMs = max(out.SpanMs, d.Report.SpanMs)
		out.SampleEvery = max(out.SampleEvery, d.Report.SampleEvery)
		for _, h := range d.Report.Keys {
			c := byKey[h.Key]
			if c == nil {
				c = &ClusterHot{Hot: Hot{Key: h.Key}}
				byKey[h.Key] = c
				order = append(order, c)
			}
			c.Ops += h.Ops
			c.PerSecond += h.PerSecond
			c.Low += h.Low
			c.High += h.High
			c.Sliced = c.Sliced || h.Sliced
			c.Nodes = append(c.Nodes, d.Node)
		}
	}
	for _, c := range order {
		c.Error = max(c.Ops-min(c.Low, c.Ops), c.High-c.Ops)
		slices.Sort(c.Nodes)
		out.Keys = append(out.Keys, *c)
	}
	out.Keys = top(out.Keys, n, func(c *ClusterHot) *Hot { return &c.Hot })
	return out
}
