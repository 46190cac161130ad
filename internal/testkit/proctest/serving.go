package proctest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// servingLine is the JSON log line a node writes once it listens everywhere.
type servingLine struct {
	Msg    string `json:"msg"`
	HTTP   string `json:"http"`
	RESP   string `json:"resp"`
	RPC    string `json:"rpc"`
	Gossip string `json:"gossip"`
	// RESPCluster is --resp-cluster's address, "" without one.
	RESPCluster string `json:"resp_cluster"`
	// GRPC is --grpc's address, "" without one.
	GRPC string `json:"grpc"`
}

// awaitServing polls the log from offset until the "node serving" line appears, the
// process exits, or StartTimeout passes.
func awaitServing(path string, offset int64, p *process) (Addrs, error) {
	deadline := time.Now().Add(StartTimeout)
	for {
		a, found, err := findServing(path, offset)
		if err != nil {
			return Addrs{}, err
		}
		if found {
			return a, nil
		}
		if p.exited() {
			return Addrs{}, fmt.Errorf("process exited before serving: %v", p.err)
		}
		if time.Now().After(deadline) {
			return Addrs{}, fmt.Errorf("no \"node serving\" line within %v", StartTimeout)
		}
		time.Sleep(10 * time.Millisecond) // the polling interval, not a stand-in for the condition
	}
}

// findServing scans the log from offset for the "node serving" line.
func findServing(path string, offset int64) (Addrs, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return Addrs{}, false, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return Addrs{}, false, err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"node serving"`)) {
			continue
		}
		var s servingLine
		if json.Unmarshal(line, &s) != nil || s.Msg != "node serving" {
			continue
		}
		if s.HTTP == "" || s.RESP == "" || s.RPC == "" || s.Gossip == "" {
			return Addrs{}, false, fmt.Errorf("\"node serving\" line lacks an address: %s", line)
		}
		return Addrs{HTTP: s.HTTP, RESP: s.RESP, RPC: s.RPC, Gossip: s.Gossip, RESPCluster: s.RESPCluster, GRPC: s.GRPC}, true, nil
	}
	return Addrs{}, false, nil
}
