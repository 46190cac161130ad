package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Package is the import path of the node command.
const Package = "github.com/leapcount/leapcount/cmd/node"

var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error

	flagsOnce sync.Once
	help      string
}

// Binary builds ./cmd/node (CGO_ENABLED=0) the first time it is called in this process
// and returns the path of the binary; later calls return the same path. It fails the
// test if the build fails.
func Binary(tb testing.TB) string {
	tb.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "leapcount-proctest-")
		if built.err != nil {
			return
		}
		bin := filepath.Join(built.dir, "leapcount-node")
		cmd := exec.Command("go", "build", "-o", bin, Package)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build %s: %v\n%s", Package, err, out)
			return
		}
		built.bin = bin
	})
	if built.err != nil {
		tb.Fatalf("proctest: %v", built.err)
	}
	return built.bin
}

// HasFlag reports whether the node binary accepts --name (read from its -h output), so
// that a test can pass a flag that other work is still adding only once it exists.
func HasFlag(tb testing.TB, name string) bool {
	tb.Helper()
	bin := Binary(tb)
	built.flagsOnce.Do(func() {
		out, _ := exec.Command(bin, "-h").CombinedOutput()
		built.help = "\n" + string(out)
	})
	return strings.Contains(built.help, "\n  -"+name+" ") || strings.Contains(built.help, "\n  -"+name+"\n")
}

// Main removes the firewall rules of test processes that died before their cleanup,
// runs the tests and then removes the directory Binary built into. Call it from
// TestMain: func TestMain(m *testing.M) { os.Exit(proctest.Main(m)) }.
func Main(m *testing.M) int {
	removeStaleRules()
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	return code
}
