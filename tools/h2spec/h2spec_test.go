//go:build h2spec

package h2spec

import (
	"bufio"
	"context"
	"encoding/xml"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/certtest"
	"github.com/leapcount/leapcount/internal/testkit/freeport"
	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// TestH2spec starts a node with --grpc and --grpc-tls and runs every h2spec case
// against each port: a case that fails must be in allowed.txt, and one there must fail.
func TestH2spec(t *testing.T) {
	bin := os.Getenv("LEAPCOUNT_NODE_BIN")
	if bin == "" {
		t.Fatal("LEAPCOUNT_NODE_BIN names no node binary (make h2spec builds it)")
	}
	h2spec := findH2spec(t)
	allowed := readAllowed(t, "allowed.txt")
	plain, tlsPort := startNode(t, bin)
	for _, run := range []struct {
		name string
		args []string
	}{
		{"plaintext", []string{"-p", strconv.Itoa(plain)}},
		{"tls", []string{"-p", strconv.Itoa(tlsPort), "-t", "-k"}},
	} {
		t.Run(run.name, func(t *testing.T) {
			t.Parallel()
			results := runH2spec(t, h2spec, run.args)
			var pass, skip, fail int
			var bad []string
			for c, r := range results {
				switch r {
				case "pass":
					pass++
					if allowed[c] != "" {
						bad = append(bad, "passes now (take it out of allowed.txt): "+c)
					}
				case "skip":
					skip++
				default:
					fail++
					if allowed[c] == "" {
						bad = append(bad, "fails: "+c+": "+r)
					}
				}
			}
			t.Logf("h2spec %s: %d cases, %d passed, %d skipped, %d failed (allowed.txt names %d)", run.name, len(results), pass, skip, fail, len(allowed))
			if len(results) < 100 {
				t.Fatalf("h2spec reported %d cases; it has 145", len(results))
			}
			sort.Strings(bad)
			for _, b := range bad {
				t.Error(b)
			}
		})
	}
}

// findH2spec is bin/gotools/h2spec (scripts/ensure-go-tools.sh), else h2spec on PATH.
func findH2spec(t *testing.T) string {
	if p, err := filepath.Abs("../../bin/gotools/h2spec"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("h2spec")
	if err != nil {
		t.Fatal("no h2spec: run scripts/ensure-go-tools.sh")
	}
	return p
}

// readAllowed reads "section | case | reason" lines: the reason by "section | case".
func readAllowed(t *testing.T, path string) map[string]string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	allowed := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, " | ")
		if len(parts) != 3 || parts[2] == "" {
			t.Fatalf("%s:%d: want section | case | reason, got %q", path, n, line)
		}
		allowed[parts[0]+" | "+parts[1]] = parts[2]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return allowed
}

// startNode runs the node on free loopback ports, with a certificate for 127.0.0.1,
// until the test ends; it returns the --grpc and --grpc-tls ports once both accept.
func startNode(t *testing.T, bin string) (plain, tlsPort int) {
	dir := t.TempDir()
	files := certtest.NewCA(t, dir, "h2spec").Issue(t, dir, "node")
	ports := make([]int, 6)
	for i := range ports {
		p, err := freeport.TCP()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	addr := func(i int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i])) }
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--http", addr(0), "--resp", addr(1), "--rpc", addr(2), "--gossip", addr(3),
		"--grpc", addr(4), "--grpc-tls", addr(5), "--client-tls-cert", files.Cert, "--client-tls-key", files.Key,
		"--limits", "../../examples/ratelimit.yaml", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	wait.ForTrue(t, 60*time.Second, func() bool {
		for _, i := range []int{4, 5} {
			c, err := net.Dial("tcp", addr(i))
			if err != nil {
				return false
			}
			c.Close()
		}
		return true
	})
	return ports[4], ports[5]
}

// runH2spec runs h2spec with args against 127.0.0.1 and returns each case's result by
// "section | case": pass, skip, or what failed.
func runH2spec(t *testing.T, h2spec string, args []string) map[string]string {
	report := filepath.Join(t.TempDir(), "report.xml")
	cmd := exec.Command(h2spec, append([]string{"-h", "127.0.0.1", "-j", report}, args...)...)
	out, err := cmd.CombinedOutput()
	if _, statErr := os.Stat(report); statErr != nil {
		t.Fatalf("h2spec wrote no report (%v): %s", err, out)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var suites struct {
		Suites []struct {
			Cases []struct {
				Package   string    `xml:"package,attr"`
				Classname string    `xml:"classname,attr"`
				Skipped   *struct{} `xml:"skipped"`
				Error     *string   `xml:"error"`
				Failure   *string   `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &suites); err != nil {
		t.Fatalf("h2spec's report: %v", err)
	}
	results := map[string]string{}
	for _, s := range suites.Suites {
		for _, c := range s.Cases {
			r := "pass"
			switch {
			case c.Skipped != nil:
				r = "skip"
			case c.Error != nil:
				r = oneLine(*c.Error)
			case c.Failure != nil:
				r = oneLine(*c.Failure)
			}
			results[c.Package+" | "+c.Classname] = r
		}
	}
	return results
}

func oneLine(s string) string {
	return fmt.Sprintf("%q", strings.TrimSpace(s))
}
