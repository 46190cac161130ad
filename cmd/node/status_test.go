package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/hotkeys"
	"github.com/leapcount/leapcount/internal/testkit/wait"
	"github.com/leapcount/leapcount/node"
)

// status reads a whole three-node cluster as OK (exit 0, every member listed), and
// once a member is killed names it dead in a note, and exits 0 again once its partitions
// have moved to the two others, a majority of the voters; hotkeys lists the keys a node
// decided. Both find the token in --token-file.
// threeNodes starts three node binaries that share a token file, the second and third
// joining the first, each with the flags extra, and waits until status reads the whole
// cluster as OK.
func threeNodes(t *testing.T, extra ...string) (nodes []proc, tokenFile string) {
	t.Helper()
	bin := nodeBinary(t)
	tokenFile = filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes = append(nodes, startBinary(t, bin, append([]string{"--name", "s1", "--token-file", tokenFile}, extra...)...))
	for _, name := range []string{"s2", "s3"} {
		nodes = append(nodes, startBinary(t, bin, append([]string{"--name", name, "--token-file", tokenFile, "--join", nodes[0].gossip}, extra...)...))
	}
	waitStatus(t, nodes[0], tokenFile, func(code int, out string) bool { return code == 0 && strings.Contains(out, "s3") })
	return nodes, tokenFile
}

// runStatus runs a subcommand against p with the token file.
func runStatus(p proc, tokenFile string, f func([]string, func(string) (string, bool), io.Writer) int, args ...string) (int, string) {
	var out bytes.Buffer
	noEnv := func(string) (string, bool) { return "", false }
	code := f(append([]string{"--http", p.http, "--token-file", tokenFile}, args...), noEnv, &out)
	return code, out.String()
}

// waitStatus polls status on p until done holds of its exit code and output.
func waitStatus(t *testing.T, p proc, tokenFile string, done func(code int, out string) bool) string {
	t.Helper()
	var last string
	err := wait.Until(60*time.Second, func() error {
		code, out := runStatus(p, tokenFile, status)
		last = out
		if !done(code, out) {
			return fmt.Errorf("exit %d", code)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("status never read as wanted: %v\n%s", err, last)
	}
	return last
}

// status reads a whole three-node cluster as OK (exit 0, every member listed), and
// once a member is killed names it dead in a note, and exits 0 again once its partitions
// have moved to the two others, a majority of the voters; hotkeys lists the keys a node
// decided. Both find the token in --token-file.
func TestStatusAndHotkeysSubcommands(t *testing.T) {
	nodes, tokenFile := threeNodes(t)
	_, text := runStatus(nodes[0], tokenFile, status)
	for _, want := range []string{"s1", "s2", "s3", "alive", "OK\n"} {
		if !strings.Contains(text, want) {
			t.Fatalf("status lacks %q:\n%s", want, text)
		}
	}
	// Every member's version reaches s1 by gossip: the node line and three member rows.
	out, err := exec.Command(nodes[0].cmd.Path, "version").Output() // leapcount <version> ...
	if err != nil {
		t.Fatal(err)
	}
	version := strings.Fields(string(out))[1]
	waitStatus(t, nodes[0], tokenFile, func(code int, out string) bool { return strings.Count(out, version) >= 4 })
	if code, out := runStatus(nodes[0], tokenFile, hotkeysCmd, "--n", "3"); code != 0 || !strings.Contains(out, "KEY") {
		t.Fatalf("hotkeys: exit %d\n%s", code, out)
	}
	if code, out := runStatus(nodes[1], tokenFile, hotkeysCmd, "--cluster"); code != 0 || !strings.Contains(out, "hot keys of 3 members, merged by s2") || !strings.Contains(out, "DECIDED ON") || strings.Contains(out, "not included") {
		t.Fatalf("hotkeys --cluster: exit %d\n%s", code, out)
	}
	var wrong bytes.Buffer
	if code := status([]string{"--http", nodes[0].http}, func(string) (string, bool) { return "", false }, &wrong); code != 1 || !strings.Contains(wrong.String(), "401") {
		t.Fatalf("status without the token: exit %d\n%s; want 1, refused", code, wrong.String())
	}
	nodes[2].cmd.Process.Kill()
	// Until gossip declares s3 dead, a cluster report names it as not included; after,
	// it is no longer a member: never is it counted among the members reported.
	code, report := runStatus(nodes[0], tokenFile, hotkeysCmd, "--cluster")
	t.Log(report)
	if code != 0 || !strings.Contains(report, "not included: s3") && !strings.Contains(report, "hot keys of 2 members") {
		t.Fatalf("hotkeys --cluster with s3 killed: exit %d\n%s", code, report)
	}
	waitStatus(t, nodes[0], tokenFile, func(code int, out string) bool {
		return code == 0 && strings.Contains(out, "NOTE: member s3 is dead: its partitions moved to the others; a voter until")
	})
}

// status says why Redis counts as down when its replicas are behind.
func TestStatusSaysReplicasBehind(t *testing.T) {
	var out bytes.Buffer
	writeStatus(&out, &node.ClusterView{Self: "n1", Status: "degraded", Redis: "down", RedisReplicasBehind: true}, &node.HotKeysView{}, nil)
	if !strings.Contains(out.String(), "redis  down (replicas behind") {
		t.Fatalf("status:\n%s\nwant the redis line to say the replicas are behind", out.String())
	}
	out.Reset()
	writeStatus(&out, &node.ClusterView{Self: "n1", Status: "degraded", Redis: "down"}, &node.HotKeysView{}, nil)
	if strings.Contains(out.String(), "replicas behind") {
		t.Fatalf("status:\n%s\nwant no word of replicas when Redis is simply down", out.String())
	}
}

// hotkeys marks a key whose limit is being sliced in its SLICED column, in a node's
// report and in a cluster's, and leaves the others' empty.
func TestHotkeysMarkSlicedKeys(t *testing.T) {
	keys := []hotkeys.Hot{{Key: "hot", Ops: 900, Sliced: true}, {Key: "warm", Ops: 90}}
	var own bytes.Buffer
	writeHotKeys(&own, &node.HotKeysView{Node: "s1", Report: hotkeys.Report{SpanMs: 1000, SampleEvery: 16, Keys: keys}})
	wide := &node.ClusterHotKeysView{Node: "s1", Members: []string{"s1", "s2"}}
	for _, k := range keys {
		wide.Keys = append(wide.Keys, hotkeys.ClusterHot{Hot: k, Nodes: []string{"s1", "s2"}})
	}
	var merged bytes.Buffer
	writeClusterHotKeys(&merged, wide)
	for _, out := range []string{own.String(), merged.String()} {
		lines := strings.Split(out, "\n")
		if len(lines) < 4 || !strings.HasSuffix(strings.TrimSpace(lines[1]), "SLICED") ||
			!strings.HasPrefix(lines[2], `"hot"`) || !strings.HasSuffix(strings.TrimSpace(lines[2]), "sliced") ||
			!strings.HasPrefix(lines[3], `"warm"`) || strings.Contains(lines[3], "sliced") {
			t.Errorf("want a SLICED column, \"hot\" marked, \"warm\" not:\n%s", out)
		}
	}
}
