package faultload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
)

// BatchMax is the most ops one POST /v1/batch may carry.
const BatchMax = 1000

// Counter reads the counts of keys through one node.
type Counter interface {
	Counts(ctx context.Context, keys []string, window string) ([]int64, error)
}

// HTTPCounter reads counts with POST /v1/batch count ops, BatchMax at a time.
type HTTPCounter struct {
	Addr   string // host:port
	Client *http.Client
}

type batchOp struct {
	Op     string `json:"op"`
	Key    string `json:"key"`
	Window string `json:"window"`
}

type batchResult struct {
	Key   string `json:"key"`
	Count *int64 `json:"count"`
	Error string `json:"error"`
}

// Counts implements Counter.
func (h HTTPCounter) Counts(ctx context.Context, keys []string, window string) ([]int64, error) {
	hc := h.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	out := make([]int64, 0, len(keys))
	for lo := 0; lo < len(keys); lo += BatchMax {
		hi := min(lo+BatchMax, len(keys))
		ops := make([]batchOp, 0, hi-lo)
		for _, k := range keys[lo:hi] {
			ops = append(ops, batchOp{Op: "count", Key: k, Window: window})
		}
		body, _ := json.Marshal(map[string]any{"ops": ops})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+h.Addr+"/v1/batch", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("POST /v1/batch on %s: %d %s", h.Addr, resp.StatusCode, data)
		}
		var res struct{ Results []batchResult }
		if err := json.Unmarshal(data, &res); err != nil {
			return nil, fmt.Errorf("POST /v1/batch on %s: %v", h.Addr, err)
		}
		if len(res.Results) != hi-lo {
			return nil, fmt.Errorf("POST /v1/batch on %s: %d results for %d ops", h.Addr, len(res.Results), hi-lo)
		}
		for i, r := range res.Results {
			if r.Error != "" || r.Count == nil {
				return nil, fmt.Errorf("count %q on %s: error %q", keys[lo+i], h.Addr, r.Error)
			}
			out = append(out, *r.Count)
		}
	}
	return out, nil
}

// RESPCounter reads counts with pipelined SW.COUNT commands, BatchMax at a time.
type RESPCounter struct {
	Addr string // host:port
}

// Counts implements Counter.
func (rc RESPCounter) Counts(ctx context.Context, keys []string, window string) ([]int64, error) {
	c := redis.NewClient(&redis.Options{Addr: rc.Addr, Protocol: 2, MaxRetries: -1, DisableIdentity: true,
		ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	defer c.Close()
	out := make([]int64, 0, len(keys))
	for lo := 0; lo < len(keys); lo += BatchMax {
		hi := min(lo+BatchMax, len(keys))
		pipe := c.Pipeline()
		cmds := make([]*redis.Cmd, 0, hi-lo)
		for _, k := range keys[lo:hi] {
			cmds = append(cmds, pipe.Do(ctx, "SW.COUNT", k, window))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("SW.COUNT pipeline on %s: %v", rc.Addr, err)
		}
		for i, cmd := range cmds {
			n, err := cmd.Int64()
			if err != nil {
				return nil, fmt.Errorf("SW.COUNT %q on %s: %v", keys[lo+i], rc.Addr, err)
			}
			out = append(out, n)
		}
	}
	return out, nil
}
