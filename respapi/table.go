package respapi

import "github.com/leapcount/leapcount/counter"

// command is one command the server knows.
type command struct {
	name   string       // lower case, as replies and metrics name it
	arity  int          // as Redis counts it, name included: n means exactly n, -n at least n
	noAuth bool         // allowed before AUTH (as in Redis: AUTH, HELLO, QUIT; not PING)
	kind   counter.Kind // set for the SW.* commands, which are ops for the Decider
	run    func(s *Server, c *client, args [][]byte) error
	id     int // index into the per-command metrics
}

// commandList is every command; the SW.* ones have a kind and no run.
var commandList = []*command{
	{name: "sw.incr", arity: -3, kind: counter.Incr},
	{name: "sw.count", arity: -3, kind: counter.Count},
	{name: "sw.allow", arity: -4, kind: counter.Allow},
	{name: "sw.reset", arity: -3, kind: counter.Reset},
	{name: "ping", arity: -1, run: (*Server).ping},
	{name: "echo", arity: 2, run: (*Server).echo},
	{name: "quit", arity: -1, noAuth: true, run: (*Server).quit},
	{name: "hello", arity: -1, noAuth: true, run: (*Server).hello},
	{name: "auth", arity: -2, noAuth: true, run: (*Server).auth},
	{name: "select", arity: 2, run: (*Server).selectDB},
	{name: "command", arity: -1}, // run set in init: COMMAND describes commandList itself
	{name: "info", arity: -1, run: (*Server).info},
	{name: "config", arity: -2, run: (*Server).config},
	{name: "client", arity: -2, run: (*Server).clientCmd},
	{name: "cluster", arity: -2, run: (*Server).clusterCmd},
	{name: "readonly", arity: 1, run: (*Server).readonly},
	{name: "readwrite", arity: 1, run: (*Server).readonly},
	{name: "multi", arity: 1, run: (*Server).multiCmd},
	{name: "exec", arity: 1}, // run set in init: EXEC runs commands of commandList
	{name: "discard", arity: 1, run: (*Server).discard},
	{name: "watch", arity: -2, run: (*Server).watch},
	{name: "unwatch", arity: 1, run: (*Server).unwatch},
}

// commands finds a command by its lower-case name.
var commands = func() map[string]*command {
	m := make(map[string]*command, len(commandList))
	for i, c := range commandList {
		c.id = i
		m[c.name] = c
	}
	return m
}()

// These run commands of commandList, so they cannot be in its initializer.
func init() {
	commands["command"].run = (*Server).command
	commands["exec"].run = (*Server).exec
}

// lookup finds the command named name, in any case, without allocating.
func lookup(name []byte) *command {
	var buf [16]byte // longer than any name we know
	if len(name) > len(buf) {
		return nil
	}
	lower := buf[:len(name)]
	for i, b := range name {
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		lower[i] = b
	}
	return commands[string(lower)] // the compiler does not copy for a map index
}

func (c *command) arityOK(n int) bool {
	if c.arity >= 0 {
		return n == c.arity
	}
	return n >= -c.arity
}
