package benchharness

import (
	"crypto/tls"
	"fmt"

	lg "github.com/leapcount/leapcount/tools/loadgen"
)

// The counters every side counts: a 60 s window of 10 buckets (6 s each), and for
// SW.ALLOW a limit no run reaches, so every request takes the admitting path (adds and
// answers allowed), the work an allow does when it lets a request through.
const (
	window      = "60s"
	windowMs    = "60000"
	buckets     = "10"
	allowLimit  = "1000000000"
	uniformKeys = 100_000
	hotKeys     = 100
)

// swIncr is the request of every SW.INCR side, swAllow of every SW.ALLOW side.
var (
	swIncr  = lg.Command(lg.Str("SW.INCR"), lg.Key, lg.Str(window))
	swAllow = lg.Command(lg.Str("SW.ALLOW"), lg.Key, lg.Str(window), lg.Str(allowLimit))
)

// httpAllowBody follows the key in every HTTP allow side's body.
const httpAllowBody = `","window":"60s","limit":` + allowLimit + `}`

const swIncrCommand = "SW.INCR <key> 60s"

// side is one thing measured: a request sent to a set of servers. Its CPU is the sum
// of those servers' CPU.
type side struct {
	id      string // for targets: "redis-incr", "sw-incr-1", ...
	name    string // the table's row
	command string // the request as the report shows it
	addr    string
	addrs   []string // when set, its connections spread over these instead of addr
	proto   lg.Proto
	request lg.Request
	prefix  string // its own keys: sides never share a counter
	servers []*proc
	tls     *tls.Config // when set, its connections are TLS
	keys    *keySpec    // when set, its keys instead of the group's
}

// serverSet is what one mode (unpinned, or per core) runs: a redis-server with the
// scripts loaded, one node, and three nodes joined in a cluster.
type serverSet struct {
	redis   *redisServer
	scripts shas
	one     []*nodeServer
	three   []*nodeServer
}

func (s *serverSet) all() []*proc {
	out := []*proc{s.redis.proc}
	for _, n := range append(append([]*nodeServer{}, s.one...), s.three...) {
		out = append(out, n.proc)
	}
	return out
}

func procsOf(nodes []*nodeServer) []*proc {
	out := make([]*proc, len(nodes))
	for i, n := range nodes {
		out[i] = n.proc
	}
	return out
}

// redisSides are Redis INCR (the floor: a plain counter, no window), the hash-bucket
// window and the sorted-set log, each script sent with EVALSHA.
func redisSides(s *serverSet) []*side {
	r := []*proc{s.redis.proc}
	return []*side{
		{id: "redis-incr", name: "Redis INCR", command: "INCR <key>", addr: s.redis.addr, prefix: "ri:", servers: r,
			request: lg.Command(lg.Str("INCR"), lg.Key)},
		{id: "redis-hash", name: "Redis + Lua hash window", command: "EVALSHA <hashwindow.lua> 1 <key> <now ms> 60000 10 1",
			addr: s.redis.addr, prefix: "rh:", servers: r,
			request: lg.Command(lg.Str("EVALSHA"), lg.Str(s.scripts.hashWindow), lg.Str("1"), lg.Key, lg.Now, lg.Str(windowMs), lg.Str(buckets), lg.Str("1"))},
		{id: "redis-zset", name: "Redis + Lua sorted-set log", command: "EVALSHA <zsetlog.lua> 1 <key> <now ms> 60000 <now>-<seq>",
			addr: s.redis.addr, prefix: "rz:", servers: r,
			request: lg.Command(lg.Str("EVALSHA"), lg.Str(s.scripts.zsetLog), lg.Str("1"), lg.Key, lg.Now, lg.Str(windowMs), lg.Member)},
	}
}

// topology is the nodes a leapcount side sends to (through the first): one, or three.
type topology struct {
	nodes []*nodeServer
	tag   string // in ids and key prefixes
	label string
}

func (s *serverSet) topologies() []topology {
	return []topology{{s.one, "1", "1 node"}, {s.three, "3", "3 nodes via one"}}
}

// respSides are SW.INCR and SW.ALLOW on one node and on three (every connection to the
// first node: a plain client, two ops of three forwarded to their owner).
func respSides(s *serverSet) []*side {
	var out []*side
	for _, c := range s.topologies() {
		out = append(out,
			&side{id: "sw-incr-" + c.tag, name: "leapcount SW.INCR, " + c.label, command: swIncrCommand,
				addr: c.nodes[0].resp, prefix: "c" + c.tag + ":", servers: procsOf(c.nodes), request: swIncr},
			&side{id: "sw-allow-" + c.tag, name: "leapcount SW.ALLOW, " + c.label, command: "SW.ALLOW <key> 60s " + allowLimit,
				addr: c.nodes[0].resp, prefix: "a" + c.tag + ":", servers: procsOf(c.nodes),
				request: swAllow})
	}
	return out
}

// httpSides are POST /v1/incr and /v1/allow on one node and on three (through the
// first), HTTP/1.1 keep-alive.
func httpSides(s *serverSet) []*side {
	var out []*side
	for _, c := range s.topologies() {
		incrBody := `","window":"60s"}`
		out = append(out,
			&side{id: "http-incr-" + c.tag, name: "leapcount HTTP incr, " + c.label,
				command: `POST /v1/incr {"key":"<key>","window":"60s"}`, addr: c.nodes[0].http, proto: lg.HTTP,
				prefix: "d" + c.tag + ":", servers: procsOf(c.nodes), request: lg.HTTPPost("/v1/incr", `{"key":"`, incrBody)},
			&side{id: "http-allow-" + c.tag, name: "leapcount HTTP allow, " + c.label,
				command: fmt.Sprintf(`POST /v1/allow {"key":"<key>","window":"60s","limit":%s}`, allowLimit), addr: c.nodes[0].http,
				proto: lg.HTTP, prefix: "e" + c.tag + ":", servers: procsOf(c.nodes), request: lg.HTTPPost("/v1/allow", `{"key":"`, httpAllowBody)})
	}
	return out
}
