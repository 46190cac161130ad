package benchharness

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// machine is what the report says about where it ran.
type machine struct {
	CPU, Kernel, Memory, Go, Redis, Commit, Date string
	Cores                                        int
	Load, LoadEnd                                string
}

func readMachine(redisBin string) machine {
	m := machine{
		CPU:    cpuinfo("model name"),
		Cores:  runtime.NumCPU(),
		Kernel: strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")),
		Memory: memTotal(),
		Go:     runtime.Version(),
		Date:   time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Load:   loadavg(),
	}
	if out, err := exec.Command(redisBin, "--version").Output(); err == nil {
		m.Redis = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
			m.Commit += " (with uncommitted changes)"
		}
	}
	return m
}

// loadavg is the first three fields of /proc/loadavg: the machine's load over 1, 5
// and 15 minutes, which the other users of a shared machine add to.
func loadavg() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// memTotal is MemTotal of /proc/meminfo in GiB.
func memTotal() string {
	var kb int64
	if _, err := fmt.Sscanf(meminfo("MemTotal"), "%d kB", &kb); err != nil {
		return meminfo("MemTotal")
	}
	return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
}

func cpuinfo(field string) string { return procField("/proc/cpuinfo", field) }

func meminfo(field string) string { return procField("/proc/meminfo", field) }

// procField is the value of the first "field: value" line of a /proc file.
func procField(path, field string) string {
	sc := bufio.NewScanner(strings.NewReader(readFile(path)))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == field {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
