package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// quickstartStep is one command of README's quickstart and the answer README shows.
type quickstartStep struct {
	cmd, want string
}

// README's quickstart, run in order against a new node, answers exactly what README
// shows. Its curl and redis-cli lines are read from README.md's Quickstart section:
// a curl line's answer is the "# ..." line after it, a redis-cli line's the comment at
// its end (a reply of several lines on one, two spaces apart). Before, SW.ALLOW
// answered 1 2 0 0, not the 1 1 1 0 shown: the curl allow before it had used the same
// counter.
func TestQuickstartAnswersAsREADMEShows(t *testing.T) {
	steps, err := quickstartSteps("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"curl", "redis-cli"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to run README's quickstart: %v", tool, err)
		}
	}
	p := startBinary(t, nodeBinary(t), "--name", "quickstart")
	_, respPort, _ := net.SplitHostPort(p.resp)
	for _, s := range steps {
		line := localize(s.cmd, p.http, respPort)
		out, err := exec.Command("sh", "-c", line).Output()
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if got := oneLine(string(out)); got != s.want {
			t.Errorf("%s\n got: %s\nwant: %s (README)", s.cmd, got, s.want)
		}
	}
}

// localize points a README command at the test's node: its HTTP address for
// localhost:8080, its RESP port for 6380; redis-cli formats its replies as in a
// terminal (--no-raw), as README shows them.
func localize(cmd, httpAddr, respPort string) string {
	cmd = strings.ReplaceAll(cmd, "localhost:8080", httpAddr)
	return strings.Replace(cmd, "redis-cli -p 6380", "redis-cli --no-raw -h 127.0.0.1 -p "+respPort, 1)
}

// oneLine joins the lines of a reply two spaces apart.
func oneLine(out string) string {
	return strings.Join(strings.Split(strings.TrimRight(out, "\n"), "\n"), "  ")
}

// quickstartSteps reads the curl and redis-cli commands of README's Quickstart section,
// in order, with the answers it shows. It is an error if the section has none, or a
// command shows no answer.
func quickstartSteps(readme string) ([]quickstartStep, error) {
	b, err := os.ReadFile(readme)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(quickstartSection(string(b)), "\n")
	var steps []quickstartStep
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "curl "):
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "# ") {
				return nil, fmt.Errorf("README quickstart: %q is not followed by the answer it shows (# ...)", l)
			}
			steps = append(steps, quickstartStep{l, strings.TrimPrefix(lines[i+1], "# ")})
		case strings.HasPrefix(l, "redis-cli "):
			cmd, want, ok := strings.Cut(l, " # ")
			if !ok {
				return nil, fmt.Errorf("README quickstart: %q shows no answer (# ...)", l)
			}
			steps = append(steps, quickstartStep{strings.TrimSpace(cmd), strings.TrimSpace(want)})
		}
	}
	if len(steps) == 0 {
		return nil, errors.New("README quickstart: no curl or redis-cli command found")
	}
	return steps, nil
}

// quickstartSection is README's text from "## Quickstart" to the next section, code
// blocks only.
func quickstartSection(readme string) string {
	_, s, _ := strings.Cut(readme, "\n## Quickstart\n")
	s, _, _ = strings.Cut(s, "\n## ")
	var code []string
	in := false
	for l := range strings.Lines(s) {
		if strings.HasPrefix(l, "```") {
			in = !in
			continue
		}
		if in {
			code = append(code, strings.TrimSuffix(l, "\n"))
		}
	}
	return strings.Join(code, "\n")
}
