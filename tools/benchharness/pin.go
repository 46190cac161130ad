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
	unpin, err := pin(os.Getpid(), cpus)
	if err != nil {
		return nil, err
	}
	procs := runtime.GOMAXPROCS(1)
	return func() {
		unpin()
		runtime.GOMAXPROCS(procs)
	}, nil
}

// pin moves every thread of process pid to cpus; the returned func moves them back.
func pin(pid int, cpus string) (unpin func(), err error) {
	p := strconv.Itoa(pid)
	out, err := exec.Command("taskset", "-p", "-c", p).Output()
	if err != nil {
		return nil, fmt.Errorf("taskset -p -c %s: %v", p, err)
	}
	_, old, ok := strings.Cut(strings.TrimSpace(string(out)), ": ")
	if !ok {
		return nil, fmt.Errorf("taskset: unexpected %q", out)
	}
	if out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, p).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("taskset -a -p -c %s %s: %v: %s", cpus, p, err, out)
	}
	return func() { exec.Command("taskset", "-a", "-p", "-c", old, p).Run() }, nil
}
