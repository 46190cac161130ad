package proctest

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

// CPUTime is the CPU time the node's current process has used so far, user and system,
// all threads (utime + stime of /proc/<pid>/stat).
func (n *Node) CPUTime() (time.Duration, error) {
	f, err := procStat(n.Pid())
	if err != nil {
		return 0, fmt.Errorf("%s: %v", n.name, err)
	}
	var ticks int64
	for _, i := range []int{statUtime, statStime} {
		v, err := strconv.ParseInt(string(f[i]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: /proc stat field %d: %v", n.name, i, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * clockTick, nil
}

// RSS is the resident memory of the node's current process, in bytes.
func (n *Node) RSS() (int64, error) {
	f, err := procStat(n.Pid())
	if err != nil {
		return 0, fmt.Errorf("%s: %v", n.name, err)
	}
	pages, err := strconv.ParseInt(string(f[statRSS]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: /proc stat rss: %v", n.name, err)
	}
	return pages * int64(os.Getpagesize()), nil
}

// Indexes into the fields of /proc/<pid>/stat that follow the command name: the
// state is field 3 of proc(5), index 0 here.
const (
	statState = 3 - 3
	statUtime = 14 - 3
	statStime = 15 - 3
	statRSS   = 24 - 3
)

// procStat reads the fields of /proc/<pid>/stat after the command name, which is in
// parentheses and may hold spaces.
func procStat(pid int) ([][]byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
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
