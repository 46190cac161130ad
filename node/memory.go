package node

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Sizing the default --max-counters: a quarter of the memory this process may use, at
// CounterBytes per counter unit. The estimate is deliberately high: a counter of the
// default 10 buckets with a short key holds far less (BenchmarkStoreMemory), but one of
// 16 buckets widened to 64-bit counts with a key of --max-key-bytes, in slabs that have
// just grown, holds about twice 128 + 64 bytes plus its key. So even a store full of the
// worst counters stays near a quarter of memory; typical ones use far less.
const (
	counterOverheadBytes = 256 // ring, head, index and slab slack of one unit (leaparray.UnitBuckets)
	memoryShare          = 4   // counters get 1/memoryShare of the memory
	minDefaultCounters   = 10_000
)

// CounterBytes is the memory one counter unit is budgeted when --max-counters is sized
// from memory: counterOverheadBytes and the longest key.
func CounterBytes(maxKeyBytes int) int64 { return counterOverheadBytes + int64(maxKeyBytes) }

// DefaultMaxCounters is --max-counters sized from the memory this process may use (see
// MemoryLimit), and a sentence saying how, for the log.
func DefaultMaxCounters(maxKeyBytes int) (int64, string) {
	limit, source := MemoryLimit(os.ReadFile)
	if limit <= 0 {
		return minDefaultCounters, "memory limit unknown (" + source + "): the minimum"
	}
	n := max(limit/memoryShare/CounterBytes(maxKeyBytes), minDefaultCounters)
	return n, fmt.Sprintf("a quarter of %d MiB (%s) at %d bytes a counter", limit>>20, source, CounterBytes(maxKeyBytes))
}

// Where the memory limit is read from: the cgroup (v2, else v1) the process runs in,
// which a container's limit sets, and the machine's memory.
const (
	cgroupV2Max = "/sys/fs/cgroup/memory.max"
	cgroupV1Max = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
	procMeminfo = "/proc/meminfo"
)

// noLimit is what cgroup v1 reports when no limit is set (the largest page-aligned
// int64); anything at or above it is no limit.
const noLimit = 1 << 62

// MemoryLimit is the memory this process may use: the smaller of its cgroup's limit
// and the machine's MemTotal, and where it came from. It is 0 when neither can be read.
func MemoryLimit(read func(string) ([]byte, error)) (int64, string) {
	total, _ := memTotal(read)
	limit, source := total, procMeminfo
	for _, path := range []string{cgroupV2Max, cgroupV1Max} {
		if b, err := read(path); err == nil {
			if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 && v < noLimit &&
				(limit <= 0 || v < limit) {
				limit, source = v, path
			}
			break // "max", or a number: the first file present is the cgroup in use
		}
	}
	if limit <= 0 {
		return 0, "neither a cgroup limit nor " + procMeminfo + " could be read"
	}
	return limit, source
}

// memTotal reads MemTotal from /proc/meminfo, in bytes.
func memTotal(read func(string) ([]byte, error)) (int64, error) {
	b, err := read(procMeminfo)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no MemTotal in %s", procMeminfo)
}

// memReturn decides when to give the memory a sweep freed back to the operating
// system. Go returns freed heap on its own only slowly, and only after a collection,
// which a node that has gone quiet after a flood may not run for a long time: its RSS
// would stay at the flood's peak. runtime/debug.FreeOSMemory does it at once, at the
// cost of a full collection, so it is done only after a large fall, once the fall has
// settled (a whole sweep pass freed little: counters that expire over some seconds are
// freed over as many sweeps, and a return in the middle would leave the rest to the
// next, a minute later), and at most once per every.
type memReturn struct {
	every   time.Duration // least time between two returns
	minFall int64         // least fall worth a return, bytes
	high    int64         // the most the store held since the last return
	recent  [sweepPass]int64
	n       int       // sweeps seen
	last    time.Time // the last return
}

// Defaults of memReturn: a fall of a quarter of the store and at least 16 MiB, at most
// once a minute; a fall has settled when the last sweepPass sweeps (a pass over the
// store: sweepLoop looks at a tenth of it each time) freed less than minFall/8.
const (
	memReturnEvery   = time.Minute
	memReturnMinFall = 16 << 20
	sweepPass        = 10
)

// after is told what the store holds after a sweep, at now, and reports whether to
// give memory back now.
func (m *memReturn) after(held int64, now time.Time) bool {
	before := held // the most it held over the last pass
	for i := range min(m.n, sweepPass) {
		before = max(before, m.recent[i])
	}
	m.recent[m.n%sweepPass] = held
	m.n++
	m.high = max(m.high, held)
	fall := m.high - held
	if fall < m.minFall || fall < m.high/4 || before-held >= m.minFall/8 || now.Sub(m.last) < m.every {
		return false
	}
	m.high, m.last = held, now
	return true
}
