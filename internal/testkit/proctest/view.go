package proctest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// View is a node's GET /v1/cluster.
type View struct {
	Self       string   `json:"self"`
	Members    []Member `json:"members"`
	Epoch      string   `json:"epoch"`
	Partitions int      `json:"partitions"`
	Ready      bool     `json:"ready"`
	Counters   int      `json:"counters"`
	Owned      int      `json:"owned"`
	Held       int      `json:"held"`
	Status     string   `json:"status"` // "ok", or "degraded" while Redis is down
	Redis      string   `json:"redis"`  // "off", "up" or "down"
	Security   struct {
		RPC     string `json:"rpc"`
		Gossip  string `json:"gossip"`
		Cluster string `json:"cluster"`
		Refused int64  `json:"refused"`
	} `json:"security"`
}

// Member is one entry of View.Members.
type Member struct {
	Name       string `json:"name"`
	Addr       string `json:"addr"`
	State      string `json:"state"`
	RPC        string `json:"rpc"`
	Partitions int    `json:"partitions"`
	Voter      bool   `json:"voter"`
}

// Alive are the names of the members in state "alive", sorted.
func (v View) Alive() []string {
	var out []string
	for _, m := range v.Members {
		if m.State == "alive" {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Shares is the sum of the alive members' partitions.
func (v View) Shares() int {
	sum := 0
	for _, m := range v.Members {
		if m.State == "alive" {
			sum += m.Partitions
		}
	}
	return sum
}

// View fetches the node's GET /v1/cluster.
func (n *Node) View() (View, error) {
	var v View
	body, code, err := n.c.get(n.HTTP(), "/v1/cluster")
	if err != nil {
		return v, fmt.Errorf("%s: GET /v1/cluster: %v", n.name, err)
	}
	if code != http.StatusOK {
		return v, fmt.Errorf("%s: GET /v1/cluster: %d %s", n.name, code, body)
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("%s: GET /v1/cluster: %v in %s", n.name, err, body)
	}
	return v, nil
}

// Ready reports nil once the node's GET /readyz answers 200.
func (n *Node) Ready() error {
	body, code, err := n.c.get(n.HTTP(), "/readyz")
	if err != nil {
		return fmt.Errorf("%s: GET /readyz: %v", n.name, err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("%s: GET /readyz: %d %s", n.name, code, strings.TrimSpace(string(body)))
	}
	return nil
}

func (c *Cluster) get(addr, path string) ([]byte, int, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, 0, err
	}
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return body, resp.StatusCode, err
}

// Converged returns nil once every live node (running, not paused) answers /readyz
// with 200 and its /v1/cluster agrees with the others' (CheckViews) on exactly the live
// nodes.
func (c *Cluster) Converged() error {
	live := c.Live()
	want := make([]string, len(live))
	views := make([]View, len(live))
	for i, n := range live {
		want[i] = n.name
		if err := n.Ready(); err != nil {
			return err
		}
		v, err := n.View()
		if err != nil {
			return err
		}
		views[i] = v
	}
	return CheckViews(want, views)
}

// CheckViews returns nil when every view (one per node) lists exactly the members
// named in want as alive, each with partitions of its own (a member that is not a voter
// joins the ring a lease after gossip showed it, a voter at once), their shares adding
// up to the partition count, holds the lease of every partition it owns, and has the
// same ring epoch as the others. Which members are voters (at most --voters) is not
// looked at.
func CheckViews(want []string, views []View) error {
	want = slices.Sorted(slices.Values(want))
	for i, v := range views {
		if got := v.Alive(); !slices.Equal(got, want) {
			return fmt.Errorf("%s sees alive %v; want %v", v.Self, got, want)
		}
		for _, m := range v.Members {
			if m.State == "alive" && m.Partitions == 0 {
				return fmt.Errorf("%s: member %s (a voter: %v) owns no partitions", v.Self, m.Name, m.Voter)
			}
		}
		if v.Partitions == 0 || v.Shares() != v.Partitions {
			return fmt.Errorf("%s: alive members own %d partitions; want all %d", v.Self, v.Shares(), v.Partitions)
		}
		if v.Held != v.Owned {
			return fmt.Errorf("%s holds the lease of %d of its %d partitions", v.Self, v.Held, v.Owned)
		}
		if i > 0 && v.Epoch != views[0].Epoch {
			return fmt.Errorf("%s: epoch %s; %s has %s", v.Self, v.Epoch, views[0].Self, views[0].Epoch)
		}
	}
	return nil
}
