package benchharness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/leapcount/leapcount/internal/testkit/freeport"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server process with persistence off, and a control client.
type redisServer struct {
	*proc
	addr   string
	client *redis.Client
}

// startRedis starts a redis-server on a free loopback port (pinned to cpus when set),
// with extra arguments, and waits until it answers PING.
func (h *harness) startRedis(name, cpus string, extra ...string) (*redisServer, error) {
	port, err := freeport.TCPAndUDP()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(h.procs.dir, name)
	if err := mkdir(dir); err != nil {
		return nil, err
	}
	args := append(redisArgs(port, dir), extra...)
	p, err := h.procs.start(name, cpus, nil, h.redisBin, args...)
	if err != nil {
		return nil, err
	}
	r := &redisServer{proc: p, addr: loopback(port), client: redis.NewClient(&redis.Options{
		Addr: loopback(port), Protocol: 2, DisableIdentity: true, ReadTimeout: time.Minute, WriteTimeout: time.Minute,
	})}
	err = poll(15*time.Second, p, func() error { return r.client.Ping(context.Background()).Err() })
	if err != nil {
		return nil, fmt.Errorf("%s: %v\n%s", name, err, p.logTail())
	}
	return r, nil
}

// redisArgs are the command line of every redis-server of the harness: loopback, no
// persistence, defaults otherwise (one I/O thread, jemalloc).
func redisArgs(port int, dir string) []string {
	return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--protected-mode", "no", "--logfile", ""}
}

// nodeServer is one leapcount node process and its addresses.
type nodeServer struct {
	*proc
	http, resp, gossip, rpc string
}

// nodeOpts shape the nodes of one start.
type nodeOpts struct {
	cpus       string               // pin to these CPUs ("" unpinned)
	gomaxprocs int                  // GOMAXPROCS (0: Go's default, every CPU)
	extra      []string             // more flags, e.g. --redis
	each       func(i int) []string // more flags for node i alone (nil: none)
}

// startNodes starts n nodes named <name>-<i>, each joining all the others (n > 1), and
// waits until they serve: every node ready, all alive in every view, every partition
// held by its owner.
func (h *harness) startNodes(name string, n int, o nodeOpts) ([]*nodeServer, error) {
	nodes := make([]*nodeServer, n)
	gossip := make([]string, n)
	for i := range nodes {
		ns := &nodeServer{}
		for _, addr := range []*string{&ns.http, &ns.resp, &ns.gossip, &ns.rpc} {
			port, err := freeport.TCPAndUDP()
			if err != nil {
				return nil, err
			}
			*addr = loopback(port)
		}
		nodes[i], gossip[i] = ns, ns.gossip
	}
	for i, ns := range nodes {
		args := append(nodeArgs(fmt.Sprintf("%s-%d", name, i), ns, gossip, n), o.extra...)
		if o.each != nil {
			args = append(args, o.each(i)...)
		}
		var env []string
		if o.gomaxprocs > 0 {
			env = append(env, "GOMAXPROCS="+strconv.Itoa(o.gomaxprocs))
		}
		p, err := h.procs.start(fmt.Sprintf("%s-%d", name, i), o.cpus, env, h.nodeBin, args...)
		if err != nil {
			return nil, err
		}
		ns.proc = p
	}
	if err := h.waitServing(nodes); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return nodes, nil
}

// nodeArgs is a node's command line: its addresses, the others to join, warnings only
// in the log, the profiler (for a look at a hotspot) and a counter cap above what the
// memory section loads, so the default sizing from this machine's memory plays no part.
func nodeArgs(name string, ns *nodeServer, gossip []string, n int) []string {
	args := []string{"--name", name, "--http", ns.http, "--resp", ns.resp, "--gossip", ns.gossip, "--rpc", ns.rpc,
		"--log-level", "warn", "--pprof", "--max-counters", "30000000"}
	if n > 1 {
		args = append(args, "--join", strings.Join(gossip, ","))
	}
	return args
}

// waitServing polls until every node is ready and, with several, they agree.
func (h *harness) waitServing(nodes []*nodeServer) error {
	for _, ns := range nodes {
		err := poll(20*time.Second, ns.proc, func() error { return h.getOK(ns.http, "/readyz", nil) })
		if err != nil {
			return fmt.Errorf("%s not ready: %v\n%s", ns.name, err, ns.logTail())
		}
	}
	if len(nodes) == 1 {
		return nil
	}
	return poll(60*time.Second, nodes[0].proc, func() error { return h.converged(nodes) })
}

// clusterView is the part of GET /v1/cluster that says whether the nodes agree.
type clusterView struct {
	Members []struct {
		State      string `json:"state"`
		Partitions int    `json:"partitions"`
	} `json:"members"`
	Epoch      string `json:"epoch"`
	Partitions int    `json:"partitions"`
	Held       int    `json:"held"`
}

// converged is nil once every node sees them all alive with the same epoch, their
// shares adding up to every partition, and every partition is held (decided now).
func (h *harness) converged(nodes []*nodeServer) error {
	var epoch string
	held, total := 0, 0
	for _, ns := range nodes {
		var v clusterView
		if err := h.getOK(ns.http, "/v1/cluster", &v); err != nil {
			return err
		}
		alive, shares := 0, 0
		for _, m := range v.Members {
			if m.State == "alive" {
				alive++
				shares += m.Partitions
			}
		}
		if alive != len(nodes) || shares != v.Partitions || (epoch != "" && v.Epoch != epoch) {
			return fmt.Errorf("%s: %d alive, %d of %d partitions, epoch %s", ns.name, alive, shares, v.Partitions, v.Epoch)
		}
		epoch, held, total = v.Epoch, held+v.Held, v.Partitions
	}
	if held != total {
		return fmt.Errorf("%d of %d partitions held", held, total)
	}
	return nil
}

// getOK GETs path from addr and wants 200; into, when set, takes the JSON body.
func (h *harness) getOK(addr, path string, into any) error {
	body, err := h.get(addr, path)
	if err != nil || into == nil {
		return err
	}
	return json.Unmarshal(body, into)
}

func (h *harness) get(addr, path string) ([]byte, error) {
	resp, err := h.http.Get("http://" + addr + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return body, err
}

// poll calls f until it returns nil, the deadline passes or p exits.
func poll(d time.Duration, p *proc, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if p.exited() {
			return errors.New("process exited")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %v", d, err)
		}
		time.Sleep(50 * time.Millisecond) // the polling interval
	}
}
