package benchharness

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// The per-core mode runs the servers on CPU serverCPU, each with GOMAXPROCS=1, and the
// load generator (this process) on clientCPU with one P: a server's figure is then what
// one core of its own gives it.
const (
	serverCPU = "1"
	clientCPU = "0"
)

// pinSelf moves every thread of this process to cpus and sets GOMAXPROCS to one; the
// returned func undoes both. Threads started later inherit the mask.
func pinSelf(cpus string) (restore func(), err error) {
	pid := strconv.Itoa(os.Getpid())
	out, err := exec.Command("taskset", "-p", "-c", pid).Output()
	if err != nil {
		return nil, fmt.Errorf("taskset -p -c %s: %v", pid, err)
	}
	_, old, ok := strings.Cut(strings.TrimSpace(string(out)), ": ")
	if !ok {
		return nil, fmt.Errorf("taskset: unexpected %q", out)
	}
	if out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, pid).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("taskset -a -p -c %s %s: %v: %s", cpus, pid, err, out)
	}
	procs := runtime.GOMAXPROCS(1)
	return func() {
		exec.Command("taskset", "-a", "-p", "-c", old, pid).Run()
		runtime.GOMAXPROCS(procs)
	}, nil
}
