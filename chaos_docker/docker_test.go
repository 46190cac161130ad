//go:build chaos

package chaosdocker

import (
	"strings"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// The faults, each a Docker or Compose command on one service's container.

func (c *cluster) kill(node string)    { docker(c.t, "kill", c.ids[node]) }
func (c *cluster) start(node string)   { docker(c.t, "start", c.ids[node]) }
func (c *cluster) pause(node string)   { docker(c.t, "pause", c.ids[node]) }
func (c *cluster) unpause(node string) { docker(c.t, "unpause", c.ids[node]) }

// restart stops a node gracefully (SIGTERM: it hands its partitions on and leaves)
// and starts it again.
func (c *cluster) restart(node string) { c.dc.must(c.t, "restart", node) }

// network is the name of the one network a container is on, and its address there.
func (c *cluster) network(node string) (name, ip string) {
	out := docker(c.t, "inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{$v.IPAddress}}{{end}}", c.ids[node])
	f := strings.Fields(out)
	if len(f) != 2 {
		c.t.Fatalf("%s is on networks %q; want exactly one", node, out)
	}
	return f[0], f[1]
}

// disconnect cuts a node off the compose network (from the other nodes, from Redis and
// from its published ports) and returns the network and the address it had.
func (c *cluster) disconnect(node string) (network, ip string) {
	network, ip = c.network(node)
	docker(c.t, "network", "disconnect", network, c.ids[node])
	return network, ip
}

// reconnect puts the node back on the network under its service name (peers reach it
// by that name) and fails the test if Docker gave it another address: its peers learned
// its gossip address once, when it started.
func (c *cluster) reconnect(node, network, ip string) {
	docker(c.t, "network", "connect", "--alias", node, network, c.ids[node])
	if _, now := c.network(node); now != ip {
		c.t.Fatalf("%s came back on %s as %s; it was %s", node, network, now, ip)
	}
}

// join starts node4 (the scale profile), which joins the others.
func (c *cluster) join() {
	c.dc.must(c.t, "--profile", "scale", "up", "-d", "--no-deps", "node4")
	c.ids["node4"] = c.id("node4")
	c.members = append(c.members, "node4")
}

// leave stops node4 gracefully and removes its container.
func (c *cluster) leave() {
	c.dc.must(c.t, "--profile", "scale", "stop", "node4")
	c.dc.must(c.t, "--profile", "scale", "rm", "-f", "node4")
	c.members = c.others("node4")
}

func (c *cluster) stopRedis()  { c.dc.must(c.t, "stop", "redis") }
func (c *cluster) startRedis() { c.dc.must(c.t, "start", "redis") }

// wipeRedis removes the stopped Redis container and its data volume, and creates both
// anew: Redis comes back empty.
func (c *cluster) wipeRedis() {
	volume := docker(c.t, "inspect", "-f", `{{range .Mounts}}{{if eq .Destination "/data"}}{{.Name}}{{end}}{{end}}`, c.ids["redis"])
	c.dc.must(c.t, "rm", "-f", "redis")
	docker(c.t, "volume", "rm", volume)
	c.dc.must(c.t, "up", "-d", "--no-deps", "redis")
	c.ids["redis"] = c.id("redis")
}

// logged waits until a node's log holds text.
func (c *cluster) logged(node, text string) {
	c.t.Helper()
	wait.For(c.t, 10*time.Second, func() error {
		out, err := command(nil, "docker", "logs", c.ids[node])
		if err == nil && !strings.Contains(out, text) {
			err = errNotLogged{node, text}
		}
		return err
	})
}

type errNotLogged struct{ node, text string }

func (e errNotLogged) Error() string { return e.node + " has not logged " + e.text }
