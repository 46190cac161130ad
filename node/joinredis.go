package node

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/leapcount/leapcount/cluster"
)

// With --join-redis the members of a cluster list their gossip addresses in Redis
// (fallback.Members) and join each other from that list: the replicas of a Deployment
// behind one Service share Redis, and no name lists them. docs/kubernetes.md says
// how to run them.

// hasSeeds reports whether this node has anyone to join: a join list, or Redis's list
// of members. A node without is a cluster of its own from its start.
func (c *Config) hasSeeds() bool { return len(c.Join) > 0 || c.JoinRedis }

// listingsPerTTL is how many re-join intervals a listing outlives: a member that misses
// a renewal or two (Redis slow, a failover) stays listed.
const listingsPerTTL = 4

// registry is the cluster's list of members in Redis, with --join-redis; else nil.
func (n *Node) registry() cluster.Registry {
	if !n.cfg.JoinRedis || n.redis == nil {
		return nil
	}
	every := n.cfg.RejoinInterval
	if every <= 0 {
		every = cluster.DefaultRejoinInterval
	}
	return n.redis.Members(cmp.Or(n.cfg.clusterLabel(), "leapcount"), listingsPerTTL*every)
}

// routeTimeout bounds the lookup of Redis's host name in advertiseToward.
const routeTimeout = 5 * time.Second

// advertiseToward is the host a node with --join-redis and --rpc on every interface
// advertises when --advertise is not given: the local address its packets to Redis
// leave from (in a pod, the pod's IP: what peers in its network reach it at). Connecting
// a UDP socket sends nothing; it only picks the route. Redis on a unix socket, or a name
// that does not resolve, leaves the first global unicast address of an interface.
func advertiseToward(redisURL string) (string, error) {
	if host := redisHostPort(redisURL); host != "" {
		d := net.Dialer{Timeout: routeTimeout}
		if c, err := d.Dial("udp", host); err == nil {
			defer c.Close()
			if a, ok := c.LocalAddr().(*net.UDPAddr); ok && !a.IP.IsUnspecified() {
				return a.IP.String(), nil
			}
		}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("no address to advertise: %w; set --advertise", err)
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.IsGlobalUnicast() {
			return ip.IP.String(), nil
		}
	}
	return "", errors.New("no address to advertise: no route to Redis and no interface with a global address; set --advertise")
}

// redisHostPort is the first host:port of a --redis URL (its host; a sentinel's or a
// cluster's first address), or "" for a unix socket.
func redisHostPort(redisURL string) string {
	u, err := url.Parse(redisURL)
	if err != nil || u.Host == "" || strings.HasPrefix(u.Scheme, "unix") {
		return ""
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		return net.JoinHostPort(u.Host, "6379")
	}
	return u.Host
}
