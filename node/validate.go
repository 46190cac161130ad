package node

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/ring"
)

// ConfigError says which field (by its flag name) is wrong and why.
type ConfigError struct {
	Flag   string
	Reason string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("invalid --%s: %s", e.Flag, e.Reason) }

// Validate checks every field and names the first bad one by its flag.
func (c *Config) Validate() error {
	if strings.TrimSpace(c.Name) == "" {
		return &ConfigError{"name", "must not be empty"}
	}
	addrs := []struct {
		flag, v string
		off     bool
	}{{"http", c.HTTPAddr, c.HTTPOff}, {"resp", c.RESPAddr, c.RESPOff}, {"gossip", c.GossipAddr, false}, {"rpc", c.RPCAddr, false}}
	for _, a := range addrs {
		if a.off {
			continue
		}
		if err := checkHostPort(a.v); err != nil {
			return &ConfigError{a.flag, err.Error()}
		}
	}
	if c.GRPCAddr != "" {
		if err := checkHostPort(c.GRPCAddr); err != nil {
			return &ConfigError{"grpc", err.Error()}
		}
	}
	if err := checkPartitions(c.Partitions); err != nil {
		return err
	}
	if c.partitions() != ring.DefaultPartitionCount && c.Placement == PlacementConsistent {
		return &ConfigError{"placement", fmt.Sprintf("consistent places %d partitions: not with --partitions %d", ring.DefaultPartitionCount, c.Partitions)}
	}
	if c.Placement != "" && c.Placement != PlacementMatching && c.Placement != PlacementConsistent {
		return &ConfigError{"placement", fmt.Sprintf("%q: want %s or %s", c.Placement, PlacementMatching, PlacementConsistent)}
	}
	if c.RLQSTTL < 0 || c.RLQSTTL > time.Hour {
		return &ConfigError{"rlqs-ttl", "must be from 1ms to 1h (0: the default)"}
	}
	if c.RLQSDelivery < 0 || c.RLQSDelivery > time.Minute {
		return &ConfigError{"rlqs-delivery", "must be from 1ms to 1m (0: the default)"}
	}
	if c.SliceAfter < 0 || c.SliceAfter > 1_000_000 {
		return &ConfigError{"slice-after", "must be from 1 to 1000000 allows a second (0: the default)"}
	}
	if c.LimitsBuckets < 0 || c.LimitsBuckets > counter.MaxBuckets {
		return &ConfigError{"limits-buckets", fmt.Sprintf("must be from 1 to %d (0: the default)", counter.MaxBuckets)}
	}
	if c.Limits != "" && c.GRPCAddr == "" && c.GRPCTLSAddr == "" {
		return &ConfigError{"limits", "serves only the gRPC front end: set --grpc or --grpc-tls too"}
	}
	if c.LimitsXDS != nil && c.Limits != "" {
		return &ConfigError{"limits", "the rules come from xDS (CONFIG_TYPE=GRPC_XDS_SOTW): give one or the other"}
	}
	if c.LimitsXDS != nil && c.GRPCAddr == "" && c.GRPCTLSAddr == "" {
		return &ConfigError{"grpc", "the rules from xDS (CONFIG_TYPE=GRPC_XDS_SOTW) serve only the gRPC front end: set --grpc or --grpc-tls"}
	}
	if c.RESPCluster != "" {
		if err := checkHostPort(c.RESPCluster); err != nil {
			return &ConfigError{"resp-cluster", err.Error()}
		}
	}
	if c.RESPClusterAdvertise != "" {
		if err := checkHostPort(c.RESPClusterAdvertise); err != nil {
			return &ConfigError{"resp-cluster-advertise", err.Error()}
		}
	}
	for _, j := range c.Join {
		if err := checkSeed(j); err != nil {
			return &ConfigError{"join", err.Error()}
		}
	}
	if strings.ContainsAny(c.Advertise, ":/ ") {
		return &ConfigError{"advertise", fmt.Sprintf("%q: want a host name or IP address, without a port", c.Advertise)}
	}
	if c.JoinRedis && c.RedisURL == "" {
		return &ConfigError{"join-redis", "needs --redis: the members are listed there"}
	}
	if c.JoinRedis && c.RejoinInterval < 0 {
		return &ConfigError{"join-redis", "needs re-joins (RejoinInterval at or above 0): a listing lapses unless renewed"}
	}
	if c.Advertise == "" && unspecifiedHost(c.RPCAddr) && !c.JoinRedis {
		return &ConfigError{"advertise", fmt.Sprintf("needed when --rpc binds all interfaces (%s): peers must know which address reaches this node", c.RPCAddr)}
	}
	if c.RedisURL != "" {
		if u, err := url.Parse(c.RedisURL); err != nil || !strings.HasPrefix(u.Scheme, "redis") || u.Host == "" {
			return &ConfigError{"redis", fmt.Sprintf("%q: want redis://[user:pass@]host:port/db", c.RedisURL)}
		}
	}
	if err := c.validateRedisWait(); err != nil {
		return err
	}
	if err := c.validateSecurity(); err != nil {
		return err
	}
	if err := c.validateClientTLS(); err != nil {
		return err
	}
	if c.Token != "" && c.TokenFile != "" {
		return &ConfigError{"token-file", "give --token or --token-file, not both"}
	}
	if c.MaxClients < 1 {
		return &ConfigError{"max-clients", fmt.Sprintf("%d: must be at least 1", c.MaxClients)}
	}
	if c.RESPIdleTimeout < 0 {
		return &ConfigError{"resp-idle-timeout", "must not be negative (0: never)"}
	}
	if c.MaxKeyBytes < 1 || c.MaxKeyBytes > 1<<20 {
		return &ConfigError{"max-key-bytes", fmt.Sprintf("%d: must be from 1 to 1048576", c.MaxKeyBytes)}
	}
	if c.MaxBodyBytes < 1024 {
		return &ConfigError{"max-body-bytes", fmt.Sprintf("%d: must be at least 1024", c.MaxBodyBytes)}
	}
	if c.MaxCounters < 0 {
		return &ConfigError{"max-counters", fmt.Sprintf("%d: must not be negative (0: sized from memory)", c.MaxCounters)}
	}
	if c.MaxShapes < 1 || c.MaxShapes > MaxMaxShapes {
		return &ConfigError{"max-shapes", fmt.Sprintf("%d: must be from 1 to %d", c.MaxShapes, MaxMaxShapes)}
	}
	if c.SweepInterval <= 0 {
		return &ConfigError{"sweep-interval", "must be positive"}
	}
	if c.ShutdownTimeout <= 0 {
		return &ConfigError{"shutdown-timeout", "must be positive"}
	}
	if c.FlushInterval < time.Millisecond || c.FlushInterval > time.Minute {
		return &ConfigError{"flush-interval", fmt.Sprintf("%v: must be from 1ms to 1m", c.FlushInterval)}
	}
	if c.HandoffWait <= 0 {
		return &ConfigError{"handoff-wait", "must be positive"}
	}
	if c.Lease.Duration < 100*time.Millisecond && c.Lease.Duration != 0 {
		return &ConfigError{"lease", fmt.Sprintf("%v: must be at least 100ms", c.Lease.Duration)}
	}
	if err := c.Lease.Validate(); err != nil {
		return &ConfigError{"lease", err.Error()}
	}
	if err := c.validateGossip(); err != nil {
		return err
	}
	if c.TestClockOffset < -MaxTestClockOffset || c.TestClockOffset > MaxTestClockOffset {
		return &ConfigError{"test-clock-offset", fmt.Sprintf("%v: must be within ±%v", c.TestClockOffset, MaxTestClockOffset)}
	}
	if c.RPC.MaxBatchOps < 0 || c.RPC.MaxBatchOps > 1<<16 {
		return &ConfigError{"forward-batch", fmt.Sprintf("%d: must be from 1 to 65536", c.RPC.MaxBatchOps)}
	}
	return nil
}

func unspecifiedHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

func checkHostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q: want host:port", s)
	}
	if port == "" {
		return fmt.Errorf("%q: missing port", s)
	}
	return nil
}

// checkSeed accepts a --join entry: host:port, the host an IP or a DNS name (resolved
// when joining, not now: its records may not exist yet), the port a number.
func checkSeed(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return fmt.Errorf("%q: want host:port", s)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("%q: the port must be a number from 1 to 65535", s)
	}
	return nil
}

// validateGossip checks the failure-detection flags.
func (c *Config) validateGossip() error {
	t := c.GossipTimings
	switch {
	case t.ProbeInterval < 0:
		return &ConfigError{"gossip-probe-interval", "must not be negative"}
	case t.ProbeTimeout < 0:
		return &ConfigError{"gossip-probe-timeout", "must not be negative"}
	case t.ProbeTimeout > 0 && t.ProbeInterval > 0 && t.ProbeTimeout >= t.ProbeInterval:
		return &ConfigError{"gossip-probe-timeout", fmt.Sprintf("%v must be below --gossip-probe-interval %v", t.ProbeTimeout, t.ProbeInterval)}
	case t.SuspicionMult < 0:
		return &ConfigError{"gossip-suspicion-mult", "must not be negative"}
	}
	return nil
}

func (c Config) validateRedisWait() error {
	switch {
	case c.RedisWaitReplicas < 0:
		return &ConfigError{"redis-wait-replicas", fmt.Sprintf("%d: want 0 (off) or more", c.RedisWaitReplicas)}
	case c.RedisWaitTimeout < 0:
		return &ConfigError{"redis-wait-timeout", fmt.Sprintf("%v: want 0 (half the read timeout) or more", c.RedisWaitTimeout)}
	case c.RedisWaitReplicas > 0 && c.RedisURL == "":
		return &ConfigError{"redis-wait-replicas", "needs --redis"}
	}
	return nil
}
