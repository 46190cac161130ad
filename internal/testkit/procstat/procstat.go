// Package procstat reads a process's CPU time, resident memory and state from
// /proc/<pid>/stat (Linux). The fault tests (internal/testkit/proctest) and the benchmark
// harness (tools/cmd/bench) both measure node and redis-server processes with it.
package procstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// clockTick is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, 100 on every
// Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// CPUTime is the CPU time process pid has used so far, user and system, all threads
// (utime + stime). Its resolution is 10 ms: measure over intervals much longer.
func CPUTime(pid int) (time.Duration, error) {
	f, err := fields(pid)
	if err != nil {
		return 0, err
	}
	var ticks int64
	for _, i := range []int{statUtime, statStime} {
		v, err := strconv.ParseInt(string(f[i]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat field %d: %v", pid, i+3, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * clockTick, nil
}

// RSS is the resident memory of process pid, in bytes.
func RSS(pid int) (int64, error) {
	f, err := fields(pid)
	if err != nil {
		return 0, err
	}
	pages, err := strconv.ParseInt(string(f[statRSS]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat rss: %v", pid, err)
	}
	return pages * int64(os.Getpagesize()), nil
}

// State is the one-letter state of process pid (R, S, T for stopped, Z, ...).
func State(pid int) (byte, error) {
	f, err := fields(pid)
	if err != nil {
		return 0, err
	}
	return f[statState][0], nil
}

// Indexes into the fields of /proc/<pid>/stat that follow the command name: the
// state is field 3 of proc(5), index 0 here.
const (
	statState = 3 - 3
	statUtime = 14 - 3
	statStime = 15 - 3
	statRSS   = 24 - 3
)

// fields reads the fields of /proc/<pid>/stat after the command name, which is in
// parentheses and may hold spaces.
func fields(pid int) ([][]byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	return parse(pid, b)
}

func parse(pid int, b []byte) ([][]byte, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name in %q", pid, b)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) <= statRSS {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return f, nil
}
