package node_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/cluster/clustertest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/node/nodetest"
)

// A real Prometheus (Debian's package), scraping a three-node cluster with
// deploy/prometheus's rules loaded, reads every node's leapcount_build_info and
// evaluates a recording rule over the nodes' metrics.
func TestPrometheusScrapesACluster(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is missing: make tools (scripts/ensure-ops-tools.sh) installs Debian's package")
	}
	c := nodetest.MakeCluster(t, 3, nil)
	var targets []string
	for _, n := range c.Nodes {
		targets = append(targets, fmt.Sprintf("%q", n.HTTPAddr()))
	}
	dir := t.TempDir()
	rules, err := filepath.Abs("../deploy/prometheus/leapcount-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [%q]\n"+
		"scrape_configs:\n  - job_name: leapcount\n    static_configs: [{targets: [%s]}]\n", rules, strings.Join(targets, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := clustertest.FreeAddr(t)
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); log.Close() })

	query := func(q string) (float64, error) {
		resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var r struct {
			Status string
			Data   struct{ Result []struct{ Value [2]any } }
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return 0, err
		}
		if r.Status != "success" || len(r.Data.Result) != 1 {
			return 0, fmt.Errorf("%s: %+v", q, r)
		}
		var v float64
		_, err = fmt.Sscan(r.Data.Result[0].Value[1].(string), &v)
		return v, err
	}
	for q, want := range map[string]float64{
		`count(leapcount_build_info{job="leapcount"})`:            3,
		`sum(leapcount_members{state="alive"})`:                   9, // three members seen by each of three nodes
		`count(leapcount:store_units:ratio{job="leapcount"} < 1)`: 3,
	} {
		err := wait.Until(60*time.Second, func() error {
			got, err := query(q)
			if err == nil && got != want {
				err = fmt.Errorf("%s = %v, want %v", q, got, want)
			}
			return err
		})
		if err != nil {
			logText, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Fatalf("%v\nprometheus log:\n%s", err, logText)
		}
	}
}
