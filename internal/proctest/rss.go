package proctest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSS is the resident memory of the node's current process, in bytes (VmRSS in
// /proc/<pid>/status).
func (n *Node) RSS() (int64, error) {
	pid := n.Pid()
	if pid == 0 {
		return 0, fmt.Errorf("%s: no process started", n.name)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return vmRSS(b)
}

// vmRSS reads the VmRSS line ("VmRSS:    123456 kB") of a /proc status file.
func vmRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("VmRSS line %q: want <n> kB", sc.Text())
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS line (a zombie process has none)")
}
