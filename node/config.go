package node

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/leapcount/leapcount/cluster"
	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/authlimit"
	"github.com/leapcount/leapcount/internal/clock"
	"github.com/leapcount/leapcount/internal/xdsconfig"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/rpc"
)

// Config is everything a node needs. Field comments name the flag that sets each one.
type Config struct {
	Name        string // --name
	HTTPAddr    string // --http
	RESPAddr    string // --resp
	RESPCluster string // --resp-cluster: a second RESP address, for Redis Cluster clients (-MOVED); empty: none
	// RESPClusterAdvertise (--resp-cluster-advertise) is the host:port Redis Cluster
	// clients reach that listener at, when it is not the --advertise host and the bound
	// port (a published container port, a load balancer).
	RESPClusterAdvertise string
	GossipAddr           string   // --gossip
	RPCAddr              string   // --rpc
	Advertise            string   // --advertise: host peers use to reach this node
	Join                 []string // --join
	// JoinRedis (--join-redis) lists this node's gossip address in Redis (--redis) and
	// joins the members listed there, beside Join's: for replicas no name lists, as a
	// Deployment's behind one Service. With --rpc on all interfaces and no Advertise,
	// the node advertises the address it reaches Redis from (advertiseToward).
	JoinRedis    bool
	RedisURL     string // --redis
	Token        string // --token: required on every client request when set
	TokenFile    string // --token-file: a file holding the token (trailing newline trimmed), read at start instead of --token
	MaxKeyBytes  int    // --max-key-bytes
	MaxBodyBytes int64  // --max-body-bytes
	MaxClients   int    // --max-clients: most open connections on the RESP listener, and on the HTTP one

	// RedisWaitReplicas (--redis-wait-replicas): writes to Redis count as confirmed once
	// this many replicas acknowledged them too (fallback.Config.WaitReplicas); 0: the
	// master's answer is enough.
	RedisWaitReplicas int
	RedisWaitTimeout  time.Duration // --redis-wait-timeout: bounds each wait (0: half the read timeout)

	// AuthGuesses is the wrong-token budget per source address, shared by every front
	// end (no flag; zero fields: 10 guesses, then one a second).
	AuthGuesses authlimit.Config

	RESPIdleTimeout time.Duration // --resp-idle-timeout: a RESP connection that sends nothing this long is closed; 0: never

	// Envoy's rate limit service (package rlsapi).
	GRPCAddr    string // --grpc: its listen address; empty: off
	Limits      string // --limits: envoyproxy/ratelimit YAML, a file or a directory of them
	LimitsMerge bool   // --limits-merge: a domain in several files merges (MERGE_DOMAIN_CONFIG)
	RLSHeaders  bool   // --rls-headers: RateLimit-* response headers (LIMIT_RESPONSE_HEADERS_ENABLED)
	// LimitsXDS, instead of Limits, takes the rules from an xDS management server (no
	// flag: `leapcount-node ratelimit` sets it with CONFIG_TYPE=GRPC_XDS_SOTW).
	LimitsXDS *xdsconfig.Config
	// RLSDeniedConsumesNothing (--rls-denied-consumes-nothing): a request one descriptor
	// denies counts in none of its others, in every domain.
	RLSDeniedConsumesNothing bool
	// LimitsBuckets (--limits-buckets) is the buckets of a limit that names none (0:
	// counter.DefaultBuckets); 1 makes every such window fixed, as envoyproxy/ratelimit's.
	LimitsBuckets int
	// RLSHTTP serves envoyproxy/ratelimit's /json and /healthcheck on the HTTP address
	// beside the API (no flag: `leapcount-node ratelimit` sets it).
	RLSHTTP bool
	// RLQSTTL (--rlqs-ttl) is the assignment_time_to_live of the Rate Limit Quota
	// Service's assignments (zero: DefaultRLQSTTL): two or three of the Envoys'
	// reporting_interval.
	RLQSTTL time.Duration
	// RLQSDelivery (--rlqs-delivery) bounds how long an assignment may take to reach
	// its Envoy (zero: DefaultRLQSDelivery); an assignment is paid for until TTL and
	// delivery after it was sent.
	RLQSDelivery time.Duration
	// Slices (--slices) makes this node ask owners for slices of the limits of hot
	// counters and decide their allows from them (docs/guarantees.md, Limit slices).
	// Off, every allow goes to its counter's owner; every node lends slices either way.
	Slices bool
	// SliceAfter (--slice-after) is how many allows of one counter a second this node
	// forwards before it asks the owner for slices of its limit (zero:
	// DefaultSliceAfter).
	SliceAfter int

	// Client TLS (see docs/security.md, Client TLS): listeners that speak TLS, beside the
	// plaintext ones or instead of them, all presenting one certificate.
	RESPTLSAddr        string // --resp-tls: empty: none
	RESPClusterTLSAddr string // --resp-cluster-tls: --resp-cluster over TLS (not both)
	HTTPTLSAddr        string // --http-tls
	GRPCTLSAddr        string // --grpc-tls
	ClientTLSCertFile  string // --client-tls-cert: the certificate (PEM) the TLS listeners present
	ClientTLSKeyFile   string // --client-tls-key: its private key (PEM)
	ClientTLSCAFile    string // --client-tls-ca: when set, every TLS client must present a certificate that chains to it
	// HTTPOff and RESPOff (--http '' and --resp ''): no plaintext listener for that
	// front end, say when it is served over TLS only. An empty HTTPAddr or RESPAddr
	// without them means the default address, so that a zero Config serves.
	HTTPOff, RESPOff bool

	// The cluster plane (see docs/security.md, and package peerauth).
	TLSCertFile string   // --tls-cert: this node's certificate (PEM), for mutual TLS between nodes
	TLSKeyFile  string   // --tls-key: its private key (PEM)
	TLSCAFile   string   // --tls-ca: the CA that signs every member's certificate (PEM)
	GossipKeys  [][]byte // --gossip-key / --gossip-key-file: the first encrypts gossip and proves membership; all are accepted
	ClusterName string   // --cluster-name: members of another cluster are refused, on gossip and rpc
	Zone        string   // --zone: this node's failure domain; the voters spread over the zones (lease.View.Zones)
	// Placement (--placement) is how partitions spread over members: PlacementMatching
	// (the default, "") once every member supports it, or PlacementConsistent to keep
	// this node, and so its cluster, on the placement of releases before matching.
	Placement string
	// Partitions (--partitions) is how many partitions the ring places, Redis Cluster's
	// 16384 hash slots grouped evenly: 4096 (the default, 0) or 8192 or 16384. More
	// partitions even out what a join or a leave moves (at 64 members a join moves about
	// 1.19/N of them with 4096, 1.0/N with 16384: ring.TestPlacementAtScale) for larger
	// lease sets and owner tables. Every member of a cluster must use the same count:
	// it is part of the cluster's name on gossip and rpc (clusterLabel), so a node
	// started with another count never joins.
	Partitions int
	// MaxCounters (--max-counters) caps the counters this node holds, a counter of more
	// than 16 buckets counting once per 16 (leaparray.Bounds): new ones beyond it are
	// refused (counter.ErrFull) once no idle one is left to reclaim. 0: sized from
	// memory at start (DefaultMaxCounters).
	MaxCounters int64
	// MaxShapes (--max-shapes) caps the distinct (window, buckets) shapes this node
	// holds counters of: each costs a table of shards, whatever its counters.
	MaxShapes int

	SweepInterval time.Duration // --sweep-interval: how often idle counters are looked for
	// GCHeadroom (--gc-headroom) is the most the Go heap may grow by before the next
	// collection for the allocation rate (gcGoal; 0: DefaultGCHeadroom); negative leaves
	// it to GOGC and the store's share.
	GCHeadroom      int64
	ShutdownTimeout time.Duration // --shutdown-timeout: how long a graceful stop may take
	FlushInterval   time.Duration // --flush-interval: how often owners write deltas to Redis
	HandoffWait     time.Duration // --handoff-wait: how long an op waits for its new owner to take its partition over
	FailOpen        bool          // --fail-open: allow answers allowed when neither owner nor Redis can decide
	Pprof           bool          // --pprof: serve /debug/pprof/ on the HTTP address

	Lease         lease.Config    // --lease-*: zero fields take the lease package's defaults
	GossipTimings cluster.Timings // --gossip-*: zero fields keep memberlist's LAN defaults

	// Tuning that has no flag: tests shorten it.
	RejoinInterval time.Duration // zero: cluster.DefaultRejoinInterval; with JoinRedis, listings last four of them
	// LookupHost resolves the DNS names in Join (nil: the system's resolver).
	LookupHost cluster.LookupHost
	RPC        rpc.Config // zero fields: the rpc package's defaults
	// HTTP server bounds (zero: the Default* below). ReadTimeout covers a whole
	// request, body included, so a client that never finishes its body is cut off;
	// WriteTimeout covers handling and answering it (a /debug/pprof profile must be
	// shorter); MaxHeaderBytes caps the request line and headers (431 beyond).
	HTTPReadTimeout    time.Duration
	HTTPWriteTimeout   time.Duration
	HTTPMaxHeaderBytes int
	// TLSHandshakeTimeout bounds a client's TLS handshake on every client TLS port
	// (zero: DefaultTLSHandshakeTimeout); gRPC's covers its HTTP/2 preface too, and
	// HTTP's is its header timeout, which is never longer (docs/security.md, Hostile
	// clients).
	TLSHandshakeTimeout time.Duration
	// TLSHandshakeRate (--tls-handshake-rate) is how many TLS handshakes a second the
	// client TLS ports begin, all together, a second's worth at once; one beyond waits
	// its turn up to half of TLSHandshakeTimeout, else its connection is closed (zero:
	// DefaultTLSHandshakeRate; negative: no bound).
	TLSHandshakeRate float64
	// GRPCRequestTimeout: a gRPC request must arrive whole within it of its headers
	// (zero: DefaultGRPCRequestTimeout).
	GRPCRequestTimeout time.Duration

	// GossipTransport, when set, carries gossip instead of UDP and TCP sockets (an
	// in-process test network; see internal/testkit/netsim).
	GossipTransport memberlist.NodeAwareTransport
	// Listen, when set, opens the listeners instead of net.Listen (in-process tests).
	Listen func(network, addr string) (net.Listener, error)

	Logger *slog.Logger
	Now    clock.WallMs // the counters' clock; nil means the wall clock (plus TestClockOffset)

	// TestClockOffset (--test-clock-offset) is for tests only: it shifts the wall clock
	// that a nil Now stands for, to give one node of a cluster sharing a host clock (a
	// container chaos test) a skewed clock. It moves what Now is used for (which bucket
	// an op lands in and which buckets are still in a window, on this node and in what
	// it loads from and writes to Redis) and nothing else: leases, failure detection,
	// timeouts and Redis TTLs measure elapsed time. Never set it in production.
	TestClockOffset time.Duration
}

// MaxTestClockOffset bounds TestClockOffset either way.
const MaxTestClockOffset = 24 * time.Hour

// Defaults of the fields a zero Config leaves empty (see WithDefaults).
const (
	DefaultHTTPAddr        = "127.0.0.1:8080"
	DefaultRESPAddr        = "127.0.0.1:6380"
	DefaultGossipAddr      = "127.0.0.1:7946"
	DefaultRPCAddr         = "127.0.0.1:7947"
	DefaultMaxBodyBytes    = 1 << 20
	DefaultSweepInterval   = time.Second
	DefaultGCHeadroom      = 32 << 20
	DefaultShutdownTimeout = 10 * time.Second
	DefaultFlushInterval   = 100 * time.Millisecond
	DefaultHandoffWait     = 2 * time.Second
	DefaultMaxClients      = 10000           // as Redis's maxclients
	DefaultRESPIdleTimeout = 5 * time.Minute // --resp-idle-timeout's default (a zero Config means never)
	// DefaultMaxShapes: real deployments use a handful of shapes (one per rate-limit
	// rule), and 256 leaves room for many rules while bounding what shapes cost: a table
	// of shards each (about 30 KiB at 64 shards, so 7.5 MiB at the cap), the copy of the
	// table list made for each new one, and the sweep's pass over every shard.
	DefaultMaxShapes = 256
	MaxMaxShapes     = 1 << 16

	// The failure detection of --gossip-*: a crashed, frozen or cut-off member is
	// declared dead in 1-2 s (three nodes), below the lease, so that its partitions move
	// about when its lease runs out (failover within 3 s). Memberlist's LAN defaults
	// (1s, 500ms, 4) take about 5 s.
	DefaultGossipProbeInterval = 300 * time.Millisecond
	DefaultGossipProbeTimeout  = 150 * time.Millisecond
	DefaultGossipSuspicionMult = 3

	DefaultHTTPReadTimeout       = 30 * time.Second
	DefaultHTTPReadHeaderTimeout = 10 * time.Second
	DefaultHTTPWriteTimeout      = time.Minute
	DefaultHTTPIdleTimeout       = 2 * time.Minute
	DefaultHTTPMaxHeaderBytes    = 64 << 10
	DefaultTLSHandshakeTimeout   = 10 * time.Second
	DefaultTLSHandshakeRate      = 1000
	DefaultGRPCRequestTimeout    = 10 * time.Second
	DefaultRLQSTTL               = 5 * time.Second
	DefaultRLQSDelivery          = time.Second
	DefaultSliceAfter            = 100
)

// WithDefaults fills every zero field with its default.
func (c Config) WithDefaults() Config {
	if !c.HTTPOff {
		orDefault(&c.HTTPAddr, DefaultHTTPAddr)
	}
	if !c.RESPOff {
		orDefault(&c.RESPAddr, DefaultRESPAddr)
	}
	orDefault(&c.GossipAddr, DefaultGossipAddr)
	orDefault(&c.RPCAddr, DefaultRPCAddr)
	orDefault(&c.MaxKeyBytes, counter.DefaultMaxKeyBytes)
	orDefault(&c.MaxBodyBytes, DefaultMaxBodyBytes)
	orDefault(&c.MaxShapes, DefaultMaxShapes)
	orDefault(&c.SweepInterval, DefaultSweepInterval)
	orDefault(&c.GCHeadroom, DefaultGCHeadroom)
	orDefault(&c.ShutdownTimeout, DefaultShutdownTimeout)
	orDefault(&c.FlushInterval, DefaultFlushInterval)
	orDefault(&c.HandoffWait, DefaultHandoffWait)
	orDefault(&c.HTTPReadTimeout, DefaultHTTPReadTimeout)
	orDefault(&c.HTTPWriteTimeout, DefaultHTTPWriteTimeout)
	orDefault(&c.HTTPMaxHeaderBytes, DefaultHTTPMaxHeaderBytes)
	orDefault(&c.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout)
	orDefault(&c.TLSHandshakeRate, DefaultTLSHandshakeRate)
	orDefault(&c.GRPCRequestTimeout, DefaultGRPCRequestTimeout)
	orDefault(&c.RLQSTTL, DefaultRLQSTTL)
	orDefault(&c.RLQSDelivery, DefaultRLQSDelivery)
	orDefault(&c.SliceAfter, DefaultSliceAfter)
	orDefault(&c.MaxClients, DefaultMaxClients)
	if c.Listen == nil {
		c.Listen = net.Listen
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		off := c.TestClockOffset
		c.Now = func() int64 { return time.Now().Add(off).UnixMilli() }
	}
	return c
}

// loadToken reads the token from TokenFile, when set, into Token. It is read once, at
// start: a changed file takes effect at the next start.
func (c *Config) loadToken() error {
	if c.TokenFile == "" {
		return nil
	}
	b, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return &ConfigError{"token-file", err.Error()}
	}
	if c.Token = strings.TrimRight(string(b), "\r\n"); c.Token == "" {
		return &ConfigError{"token-file", fmt.Sprintf("%s is empty", c.TokenFile)}
	}
	if st, err := os.Stat(c.TokenFile); err == nil && st.Mode().Perm()&0o077 != 0 {
		c.Logger.Warn("the token file can be read by other users than its owner", "file", c.TokenFile, "mode", st.Mode().Perm())
	}
	return nil
}

// orDefault sets *field to def when it is the zero value.
func orDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}
