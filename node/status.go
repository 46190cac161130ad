package node

import (
	_ "embed"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/leapcount/leapcount/owner"
)

// StatusView is the body of GET /v1/status: what the page at /ui shows, in one answer.
type StatusView struct {
	Cluster  ClusterView              `json:"cluster"`
	Problems []string                 `json:"problems"` // ClusterView.Problems
	Notes    []string                 `json:"notes"`    // ClusterView.Notes
	Counters CountersView             `json:"counters"`
	Hot      HotKeysView              `json:"hot"`
	Requests map[string]RequestTotals `json:"requests"`         // by front end: http, resp, grpc
	States   map[string]int           `json:"partition_states"` // this node's partitions by owner.State (idle left out)
	TimeMs   int64                    `json:"time_ms"`          // when it was read (the page's rates divide by it)
}

// CountersView is this node's counters against --max-counters.
type CountersView struct {
	Held     int   `json:"held"`
	Units    int64 `json:"units"`     // a counter of more than 16 buckets is one unit per 16
	MaxUnits int64 `json:"max_units"` // --max-counters
	Bytes    int64 `json:"bytes"`
}

// RequestTotals are a front end's answers since the node started.
type RequestTotals struct {
	OK           uint64 `json:"ok"`
	ClientErrors uint64 `json:"client_errors"` // the request's fault: bad input, refused token
	ServerErrors uint64 `json:"server_errors"` // not decided: an owner unavailable, a store full
}

// Problems lists what needs a human, or is still settling (the status command exits 1
// and the page shows them while any is listed): this node not joined (seeds refuse it, or none answers) or not ready, a member dead that
// still owns partitions, or a dead voter with the voters alive no majority, one joining, partitions this node owns but does not decide, partitions moving, Redis down
// or its writes lagging over 30 s, this node's counters' clock off Redis's or a member's
// by more than 2.5 s, or Redis's not measurable (clock.go).
func (v *ClusterView) Problems() []string {
	out := []string{}
	switch {
	case v.AwaitingSeeds && v.JoinFailures == 0:
		out = append(out, v.Self+" has not joined the cluster yet: its first join is under way")
	case v.AwaitingSeeds:
		out = append(out, fmt.Sprintf("%s has not joined the cluster: %d joins failed (a seed refuses a node of another --cluster-name, --partitions or --gossip-key, and logs the label it refused; or no seed answers)", v.Self, v.JoinFailures))
	case !v.Ready:
		out = append(out, v.Self+" is not ready")
	}
	for _, m := range v.Members {
		switch {
		case (m.State == "dead" || m.State == "unknown") && m.Partitions > 0:
			out = append(out, fmt.Sprintf("member %s is %s and owns %d partitions", m.Name, m.State, m.Partitions))
		case (m.State == "dead" || m.State == "unknown") && m.Voter && !v.votersDecide():
			out = append(out, fmt.Sprintf("member %s is %s, a voter, and the voters alive are no majority: nothing can be decided", m.Name, m.State))
		case m.State == "alive" && m.Partitions == 0:
			out = append(out, fmt.Sprintf("member %s is joining: it owns no partitions yet", m.Name))
		}
	}
	if v.Redis == "down" {
		out = append(out, "Redis is down (counters are decided from memory; writes wait)")
	} else if v.LagMs > 30_000 {
		out = append(out, fmt.Sprintf("writes to Redis lag: the oldest batch has waited %d s", v.LagMs/1000))
	}
	if v.Owned > v.Held {
		out = append(out, fmt.Sprintf("%s decides %d of the %d partitions it owns (the rest wait for their lease or their counters)", v.Self, v.Held, v.Owned))
	}
	if v.HandingOn > 0 {
		out = append(out, fmt.Sprintf("%d partitions are moving to or from %s", v.HandingOn, v.Self))
	}
	return append(out, v.Clock.problems(v.Self)...)
}

// Notes lists what an operator should know that does not keep the cluster from having
// settled: a member dead whose partitions moved to the others (one that is a voter is
// dropped once dead lease.Config.DeadVoterAfter, and replaced, while the voters alive
// are a majority). status
// prints them; they leave its exit code 0.
func (v *ClusterView) Notes() []string {
	var out []string
	for _, m := range v.Members {
		if (m.State == "dead" || m.State == "unknown") && m.Partitions == 0 && (!m.Voter || v.votersDecide()) {
			what := "its partitions moved to the others"
			if m.Voter {
				what += "; a voter until the others drop it, dead 10 s, and put a spare member in its place"
			}
			out = append(out, fmt.Sprintf("member %s is %s: %s", m.Name, m.State, what))
		}
	}
	return out
}

// votersDecide reports whether the voters alive (or leaving) are a majority of them.
func (v *ClusterView) votersDecide() bool {
	voters, alive := 0, 0
	for _, m := range v.Members {
		if m.Voter {
			voters++
			if m.State == "alive" || m.State == "leaving" {
				alive++
			}
		}
	}
	return alive > voters/2
}

func (n *Node) statusInfo() any {
	c := n.clusterInfo().(ClusterView)
	return StatusView{Cluster: c, Problems: c.Problems(), Notes: c.Notes(),
		Counters: CountersView{Held: n.store.Len(), Units: n.store.Used(), MaxUnits: n.cfg.MaxCounters, Bytes: n.store.Bytes()},
		Hot:      n.hotKeys(10).(HotKeysView), Requests: n.requestTotals(), States: n.partitionStates(), TimeMs: n.cfg.Now()}
}

// partitionStates counts this node's partitions by state, idle (not its own) left out.
func (n *Node) partitionStates() map[string]int {
	out := map[string]int{}
	for st, k := range n.owner.States() {
		if st != owner.Idle {
			out[st.String()] = k
		}
	}
	return out
}

// requestTotals sums the front ends' request metrics by outcome.
func (n *Node) requestTotals() map[string]RequestTotals {
	out := map[string]RequestTotals{"http": {}, "resp": {}, "grpc": {}}
	families, _ := n.reg.Gather()
	for _, f := range families {
		var fe, label string
		switch f.GetName() {
		case "leapcount_http_requests_total":
			fe, label = "http", "code"
		case "leapcount_resp_commands_total":
			fe, label = "resp", "outcome"
		case "leapcount_grpc_requests_total":
			fe, label = "grpc", "code"
		default:
			continue
		}
		t := out[fe]
		for _, m := range f.GetMetric() {
			v := uint64(m.GetCounter().GetValue())
			switch outcomeOf(fe, labelValue(m, label)) {
			case "ok":
				t.OK += v
			case "client":
				t.ClientErrors += v
			default:
				t.ServerErrors += v
			}
		}
		out[fe] = t
	}
	return out
}

// outcomeOf classes a front end's outcome label: "ok", "client" or "server".
func outcomeOf(frontEnd, value string) string {
	switch frontEnd {
	case "http":
		code, _ := strconv.Atoi(value)
		switch {
		case code < 400:
			return "ok"
		case code < 500:
			return "client"
		}
		return "server"
	case "resp":
		switch value {
		case "ok":
			return "ok"
		case "bad_request":
			return "client"
		}
		return "server"
	}
	switch value { // gRPC status code names
	case "OK":
		return "ok"
	case "InvalidArgument", "Unauthenticated", "PermissionDenied", "NotFound", "ResourceExhausted", "Unimplemented", "Canceled":
		return "client"
	}
	return "server"
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

//go:embed ui.html
var uiPage []byte

// uiHandler serves the status page. The page holds no data, so it is served without
// the token; its script asks GET /v1/status, which needs it (docs/operations.md). Everything it needs is in the one file: it works offline.
func uiHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", strings.Join([]string{"default-src 'none'", "script-src 'unsafe-inline'",
			"style-src 'unsafe-inline'", "connect-src 'self'", "form-action 'none'", "frame-ancestors 'none'"}, "; "))
		w.Write(uiPage)
	})
}
