package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Syscalls is how many read-like and write-like system calls process pid has made so
// far, all threads (syscr + syscw of /proc/<pid>/io): on a virtual machine whose kernel
// entries are dear, they tell where the time goes that CPU time alone does not.
func Syscalls(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	return sumFields(b, "syscr:", "syscw:")
}

// Switches is how many times the threads of process pid now alive have been switched
// off a CPU so far, voluntarily or not (/proc/<pid>/task/*/status).
func Switches(pid int) (int64, error) {
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(paths) == 0 {
		return 0, fmt.Errorf("/proc/%d/task: no threads (%v)", pid, err)
	}
	var sum int64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited since the glob
		}
		n, err := sumFields(b, "voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p, err)
		}
		sum += n
	}
	return sum, nil
}

// sumFields adds the numbers that follow each of names at the start of a line of b; a
// name missing is an error.
func sumFields(b []byte, names ...string) (int64, error) {
	var sum int64
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		for _, name := range names {
			if rest, ok := bytes.CutPrefix(line, []byte(name)); ok {
				n, err := strconv.ParseInt(string(bytes.TrimSpace(rest)), 10, 64)
				if err != nil {
					return 0, fmt.Errorf("%s %v", name, err)
				}
				sum += n
				found++
			}
		}
	}
	if found != len(names) {
		return 0, fmt.Errorf("%d of the fields %v", found, names)
	}
	return sum, nil
}
