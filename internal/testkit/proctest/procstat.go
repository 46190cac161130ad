package proctest

import (
	"fmt"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/procstat"
)

// CPUTime is the CPU time the node's current process has used so far, user and system,
// all threads (utime + stime of /proc/<pid>/stat).
func (n *Node) CPUTime() (time.Duration, error) {
	d, err := procstat.CPUTime(n.Pid())
	if err != nil {
		return 0, fmt.Errorf("%s: %v", n.name, err)
	}
	return d, nil
}

// RSS is the resident memory of the node's current process, in bytes.
func (n *Node) RSS() (int64, error) {
	rss, err := procstat.RSS(n.Pid())
	if err != nil {
		return 0, fmt.Errorf("%s: %v", n.name, err)
	}
	return rss, nil
}

// stopped reports whether /proc says the process is stopped (state T).
func stopped(pid int) bool {
	s, err := procstat.State(pid)
	return err == nil && s == 'T'
}
