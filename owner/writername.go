package owner

import (
	"strconv"
	"strings"
)

// WriterName is the writer name of run of the node named self (Config.Writer). A fence
// names its writer's key, which ends in this name, so that a receiver can tell when the
// run that may still send the call is over (writerGone).
func WriterName(self string, run uint64) string {
	return self + "." + strconv.FormatUint(run, 16)
}

// parseWriter is the node name and run of a writer key: fallback's lc:{tag}:w:<writer>,
// or the writer name itself.
func parseWriter(key string) (name string, run uint64, ok bool) {
	if i := strings.Index(key, "}:w:"); i >= 0 {
		key = key[i+len("}:w:"):]
	}
	i := strings.LastIndexByte(key, '.')
	if i <= 0 {
		return "", 0, false
	}
	run, err := strconv.ParseUint(key[i+1:], 16, 64)
	if err != nil {
		return "", 0, false
	}
	return key[:i], run, true
}
