package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The status page, loaded in headless Chromium from a three-node cluster with a token,
// lists every member alive and the cluster as ok, and without the token shows no data
// but asks for it. Its screenshot is kept (LEAPCOUNT_ARTIFACTS, else the test's
// temporary directory).
func TestStatusPageShowsEveryMember(t *testing.T) {
	browser := chromium(t)
	nodes, _ := threeNodes(t)
	url := "http://" + nodes[0].http + "/ui#token=s3cret"
	dom := loadPage(t, browser, url, artifact(t, "ui-three-nodes.png"))
	for _, name := range []string{"s1", "s2", "s3"} {
		if !memberRow(name, "alive").MatchString(dom) {
			t.Fatalf("the page does not list %s alive:\n%s", name, dom)
		}
	}
	if !strings.Contains(dom, `class="badge ok"`) || !strings.Contains(dom, "placed by matching") {
		t.Fatalf("a whole cluster is not badged ok, or its placement is not named:\n%s", dom)
	}
	wide := loadPage(t, browser, "http://"+nodes[0].http+"/ui#token=s3cret&hot=cluster", artifact(t, "ui-cluster-hot-keys.png"))
	if !strings.Contains(wide, "every member's, merged from 3 members by s1") || !strings.Contains(wide, `<p id="hotmissing" class="dim"></p>`) {
		t.Fatalf("#hot=cluster does not show the three members' hot keys merged:\n%s", wide)
	}
	noToken := loadPage(t, browser, "http://"+nodes[0].http+"/ui", "")
	if strings.Contains(noToken, ">s2<") || !strings.Contains(noToken, `id="login" style="display: block;"`) {
		t.Fatalf("without the token the page shows data or no login:\n%s", noToken)
	}
}

// With one of three nodes killed, the page shows it dead and names the problem.
func TestStatusPageShowsAKilledMemberDead(t *testing.T) {
	browser := chromium(t)
	nodes, tokenFile := threeNodes(t)
	nodes[2].cmd.Process.Kill()
	waitStatus(t, nodes[0], tokenFile, func(code int, out string) bool { return strings.Contains(out, "member s3 is dead") })
	dom := loadPage(t, browser, "http://"+nodes[0].http+"/ui#token=s3cret", artifact(t, "ui-one-node-dead.png"))
	if !memberRow("s3", "dead").MatchString(dom) || !strings.Contains(dom, "member s3 is dead") {
		t.Fatalf("the page does not show s3 dead:\n%s", dom)
	}
	if !memberRow("s1", "alive").MatchString(dom) || !strings.Contains(dom, `class="badge warn"`) {
		t.Fatalf("the page does not show s1 alive and the cluster needing attention:\n%s", dom)
	}
}

// A hot key sliced to the nodes it comes in by (--slices) is marked sliced in the
// page's whole-cluster hot keys, decided on more than one member.
func TestStatusPageMarksASlicedKey(t *testing.T) {
	browser := chromium(t)
	nodes, _ := threeNodes(t, "--slices", "--slice-after", "5")
	for _, p := range nodes { // two of the three forward "hot" and slice it
		allowMany(t, p, "hot", 1000)
	}
	dom := loadPage(t, browser, "http://"+nodes[0].http+"/ui#token=s3cret&hot=cluster", artifact(t, "ui-sliced-hot-key.png"))
	row := regexp.MustCompile(`<td class="key">hot</td>(<td[^>]*>[^<]*</td>){3}<td>s\d(, s\d)+</td><td class="sliced">sliced</td>`)
	if !row.MatchString(dom) {
		t.Fatalf("the cluster's hot keys do not show \"hot\" decided on several members, sliced:\n%s", dom)
	}
}

// allowMany sends n allows of key (a limit never reached) to p over HTTP, one at a time.
func allowMany(t *testing.T, p proc, key string, n int) {
	t.Helper()
	body := fmt.Sprintf(`{"key":%q,"window":"1m","limit":1000000}`, key)
	for range n {
		req, err := http.NewRequest("POST", "http://"+p.http+"/v1/allow", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("allow through %s: %s", p.http, resp.Status)
		}
	}
}

func chromium(t *testing.T) string {
	t.Helper()
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is missing: make tools (scripts/ensure-ops-tools.sh) installs it")
	}
	return browser
}

// artifact is where a screenshot named name is kept: LEAPCOUNT_ARTIFACTS (make test
// sets bin/artifacts), else the test's temporary directory.
func artifact(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("LEAPCOUNT_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", filepath.Join(dir, name))
	return filepath.Join(dir, name)
}

// memberRow matches the members table's row of name in state.
func memberRow(name, state string) *regexp.Regexp {
	return regexp.MustCompile(`<tr><td>` + name + `</td><td class="state-` + state + `">` + state + `</td>`)
}

// loadPage loads url in headless Chromium, lets its script run, and returns the DOM;
// with shot set, it also saves a screenshot there.
func loadPage(t *testing.T, browser, url, shot string) string {
	t.Helper()
	profile := t.TempDir() // each run its own profile: no state between loads
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--user-data-dir=" + profile, "--virtual-time-budget=3000", "--window-size=1280,860"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, browser, append(args, "--dump-dom", url)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v", url, err)
	}
	if shot != "" {
		if b, err := exec.CommandContext(ctx, browser, append(args, "--screenshot="+shot, url)...).CombinedOutput(); err != nil {
			t.Fatalf("chromium --screenshot: %v\n%s", err, b)
		}
	}
	return string(out)
}
