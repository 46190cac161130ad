package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leapcount/leapcount/borrow"
	"github.com/leapcount/leapcount/cluster"
	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/fallback"
	"github.com/leapcount/leapcount/hotkeys"
	"github.com/leapcount/leapcount/httpapi"
	"github.com/leapcount/leapcount/internal/authlimit"
	"github.com/leapcount/leapcount/internal/certfiles"
	"github.com/leapcount/leapcount/internal/clock"
	"github.com/leapcount/leapcount/internal/connlimit"
	"github.com/leapcount/leapcount/internal/peerrpc"
	"github.com/leapcount/leapcount/leaparray"
	"github.com/leapcount/leapcount/lease"
	"github.com/leapcount/leapcount/owner"
	"github.com/leapcount/leapcount/peerauth"
	"github.com/leapcount/leapcount/respapi"
	"github.com/leapcount/leapcount/ring"
	"github.com/leapcount/leapcount/rlqs/fairshare"
	"github.com/leapcount/leapcount/rlsapi"
	"github.com/leapcount/leapcount/route"
	"github.com/leapcount/leapcount/rpc"
)

// Node is one running leapcount node.
type Node struct {
	cfg    Config
	store  *leaparray.Store
	redis  *fallback.Store // nil without --redis
	owner  *owner.Owner
	router *route.Router
	hot    *hotkeys.Sketch // the keys decided here most often lately (GET /v1/hotkeys)
	// quotaDemands are the RLQS demands of the buckets whose ledgers this node owns,
	// from every node's streams (quotaSharer).
	quotaDemands *fairshare.Demands
	handoffs     *handoffMetrics
	decisions    counter.Tally // the allows decided here (leapcount_decisions_total)
	// memberStates is each member's state at the last membership sync (logMemberChanges).
	memberStates  map[string]cluster.State
	memberChanges *prometheus.CounterVec // leapcount_member_changes_total, by new state
	reg           *prometheus.Registry
	cluster       *cluster.Cluster
	keeper        *lease.Keeper
	clock         clock.Clock      // the monotonic clock keeper and owner share
	borrower      *borrow.Borrower // this node's limit slices (nil: without --slices)

	incarnation  uint64        // this run: names it in gossip, leases and write-behind
	rpcAuth      peerauth.Mode // what authenticates peers on the rpc port
	ringMembers  []ring.Member // the members of the ring in use (watchMembership's)
	ringConfig   ring.Config   // the placement of the ring in use (watchMembership's)
	votersLogged uint64        // the voters' version last logged (watchMembership's)
	// leavers are the members gossip shows leaving or left (syncMembership's): the
	// owner waits for counters it handed to them (owner.Config.Leaving).
	leavers atomic.Pointer[map[string]bool]
	// smallestSeen is the smallest member name gossip has shown (watchMembership's):
	// only that member may found a new cluster.
	smallestSeen string
	stopLeases   context.CancelFunc
	leaseLoop    sync.WaitGroup

	authLimiter *authlimit.Limiter // wrong tokens per source, for HTTP and RESP alike

	httpSrv       *http.Server
	httpLn        *connlimit.Listener // nil with --http ''
	resp          *respapi.Server
	respLn        net.Listener // nil with --resp ''
	respClusterLn net.Listener // nil without --resp-cluster or --resp-cluster-tls
	grpcLn        net.Listener // nil without --grpc
	// Client TLS (clienttls.go): the files, and the listeners that speak TLS (nil
	// without their flag). respClusterTLS says respClusterLn is --resp-cluster-tls's.
	clientTLS      *certfiles.Source
	handshakes     *handshakePacer // nil: no --tls-handshake-rate
	respTLSLn      net.Listener
	respClusterTLS bool
	httpTLSLn      *connlimit.Listener // under httpTLS, for the refused count
	httpTLS        net.Listener
	grpcTLSLn      net.Listener
	peerAuth       *peerauth.Auth // the rpc handshake; Stop ends its watch of --tls-cert's files
	grpc           *rlsapi.Server
	limits         atomic.Pointer[limitsState] // --limits in force
	redisCluster   *redisCluster
	rpcSrv         *peerrpc.Server
	rpcClient      *peerrpc.Client
	rpcLn          net.Listener

	joined     atomic.Bool  // gossip has found a peer, or there was none to find
	ringBuilds atomic.Int64 // rings built from membership, changed or not
	stopping   atomic.Bool
	stopOnce   sync.Once
	stopErr    error
	quit       chan struct{} // closed when Stop begins; ends the background loops
	loops      sync.WaitGroup
	serving    sync.WaitGroup
}

// Start validates cfg (after filling defaults), listens on the HTTP and RESP addresses
// and serves until Stop. It fails, listening on nothing, if any address cannot be bound.
func Start(cfg Config) (*Node, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger = cfg.Logger.With("node", cfg.Name)
	if cfg.TestClockOffset != 0 {
		cfg.Logger.Warn("TEST ONLY: this node's counters run on a clock shifted from the wall clock (--test-clock-offset)", "test_clock_offset", cfg.TestClockOffset.String())
	}
	if err := cfg.loadToken(); err != nil {
		return nil, err
	}
	if cfg.JoinRedis && cfg.Advertise == "" && unspecifiedHost(cfg.RPCAddr) {
		host, err := advertiseToward(cfg.RedisURL)
		if err != nil {
			return nil, &ConfigError{"advertise", err.Error()}
		}
		cfg.Advertise = host
		cfg.Logger.Info("advertising the address this node reaches Redis from (--join-redis without --advertise)", "advertise", host)
	}
	sized := "--max-counters"
	if cfg.MaxCounters == 0 {
		cfg.MaxCounters, sized = DefaultMaxCounters(cfg.MaxKeyBytes)
	}
	cfg.Logger.Info("memory bounds", "max_counters", cfg.MaxCounters, "max_counters_from", sized, "max_shapes", cfg.MaxShapes)
	n := &Node{cfg: cfg, reg: prometheus.NewRegistry(), quit: make(chan struct{}), hot: hotkeys.New(hotkeys.Config{}), incarnation: uint64(time.Now().UnixNano()),
		authLimiter: authlimit.New(cfg.AuthGuesses)}
	limits := counter.Limits{MaxKeyBytes: cfg.MaxKeyBytes}
	auth, err := cfg.peerAuth()
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			auth.Close()
		}
	}()
	if cfg.RPC.Dial == nil {
		cfg.RPC.Dial = sourceDialer(cfg.RPCAddr)
	}
	cfg.RPC.Dial = authenticatedDial(cfg.RPC.Dial, auth)
	forwardTook := newForwardDuration(n.reg)
	if err := n.openRedis(limits); err != nil {
		return nil, err
	}
	cfg.RPC.OpDone = func(d time.Duration) { forwardTook.Observe(d.Seconds()) }
	n.rpcClient = peerrpc.NewClient(cfg.RPC)
	n.clock = clock.Real()
	n.keeper = lease.NewKeeper(lease.KeeperConfig{
		Config: cfg.Lease, Self: cfg.Name, Incarnation: n.incarnation, Partitions: cfg.partitions(),
		Exchanger: peerrpc.Heartbeats{C: n.rpcClient}, Found: !cfg.hasSeeds(), Clock: n.clock, Wall: cfg.Now, OnLapse: func(s lease.Set) { n.owner.Lapsed(s) },
		OnChange: func() {
			if o := n.owner; o != nil {
				o.LeasesChanged()
			}
		},
	})
	n.handoffs = newHandoffMetrics(n.reg)
	n.memberChanges = newMemberChanges(n.reg)
	n.owner = owner.New(owner.Config{Self: cfg.Name, Incarnation: n.incarnation, Writer: owner.WriterName(cfg.Name, n.incarnation), Store: n.store,
		Redis: timeLoads(owner.RedisIO(n.redis), n.reg), Leases: n.keeper, Clock: n.clock, Peers: countingPeers{owner.PeersIO(peerrpc.Handoffs{C: n.rpcClient}), n.handoffs}, Now: cfg.Now, Limits: limits,
		Hot: n.hot, Tally: &n.decisions, FlushInterval: cfg.FlushInterval, HandoffWait: cfg.HandoffWait, Leaving: n.leftGracefully,
		Logger: cfg.Logger.With("component", "owner")})
	n.router = route.New(cfg.Name, n.owner, peerrpc.Forwarder{C: n.rpcClient}, limits)
	n.router.FailOpen = cfg.FailOpen
	n.router.Forwarded = n.owner
	n.router.Disagrees = (&ringSyncer{sync: n.syncWith, log: func(member string, err error) {
		cfg.Logger.Debug("state exchange with a member that disagrees", "member", member, "err", err)
	}}).disagrees
	n.router.SetAdmission(route.Joining) // until joinCluster has joined (n.joined)
	if err := n.newBorrower(); err != nil {
		n.closeRedis()
		return nil, err
	}
	n.rpcSrv = peerrpc.NewServer(n.router, countingReceiver{n.owner, n.handoffs}, n.keeper.Handle, cfg.Logger.With("component", "rpc"))
	peerrpc.HandleHotKeys(n.rpcSrv, n.topKeys)
	n.quotaDemands = fairshare.New(2*(cfg.RLQSTTL+cfg.RLQSDelivery), nil)
	peerrpc.HandleQuotaShare(n.rpcSrv, n.quotaDemands.Share)
	n.rpcSrv.SetHandshake(auth.Server)
	n.rpcAuth, n.peerAuth = auth.Mode(), auth
	n.warnIfOpen(n.rpcAuth)
	n.registerMetrics()
	if err := n.listen(limits); err != nil {
		n.closeListeners()
		n.closeRedis()
		return nil, err
	}
	n.serve()
	if err := n.joinCluster(); err != nil {
		n.closeListeners()
		n.rpcSrv.Close()
		n.closeRedis()
		return nil, err
	}
	n.startLeases()
	n.startSlices()
	n.loops.Add(2)
	go n.sweepLoop()
	go func() { defer n.loops.Done(); n.owner.Run() }()
	cfg.Logger.Info("node serving", "name", cfg.Name, "http", n.HTTPAddr(), "resp", n.RESPAddr(), "resp_cluster", n.RESPClusterAddr(),
		"rpc", n.rpcLn.Addr().String(), "gossip", n.cluster.LocalAddr(), "grpc", n.GRPCAddr(),
		"http_tls", n.HTTPTLSAddr(), "resp_tls", n.RESPTLSAddr(), "grpc_tls", n.GRPCTLSAddr())
	started = true
	return n, nil
}

// Ready reports whether the node serves requests (GET /readyz): it has joined (or had
// no one to join), knows the owners, and is not stopping.
func (n *Node) Ready() bool { return n.serves() && !n.stopping.Load() }

// serves reports whether the node has joined and knows the owners.
func (n *Node) serves() bool { return n.joined.Load() && n.router.Ring() != nil }

func (n *Node) listen(limits counter.Limits) error {
	h, err := httpapi.New(httpapi.Config{
		Decider: n.router, Limits: limits, MaxBodyBytes: n.cfg.MaxBodyBytes, Token: n.cfg.Token, AuthLimiter: n.authLimiter,
		Ready: n.Ready, Cluster: n.clusterInfo, HotKeys: n.hotKeys, ClusterHotKeys: n.clusterHotKeys, Status: n.statusInfo, UI: uiHandler(), Registerer: n.reg, Logger: n.cfg.Logger,
		Metrics: promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{Registry: n.reg}),
	})
	if err != nil {
		return err
	}
	n.redisCluster = &redisCluster{n: n, settle: n.cfg.Lease.WithDefaults().Duration}
	n.resp, err = respapi.New(respapi.Config{Decider: n.router, Limits: limits, Token: n.cfg.Token, AuthLimiter: n.authLimiter,
		MaxClients: n.cfg.MaxClients, IdleTimeout: n.cfg.RESPIdleTimeout, TLSHandshakeTimeout: n.cfg.TLSHandshakeTimeout, Registerer: n.reg,
		Logger: n.cfg.Logger, MaxUnanswered: max(n.cfg.MaxBodyBytes, respapi.DefaultMaxUnanswered),
		Cluster: n.redisCluster})
	if err != nil {
		return err
	}
	if err := n.openClientTLS(); err != nil {
		return err
	}
	if !n.cfg.HTTPOff {
		httpLn, err := n.cfg.Listen("tcp", n.cfg.HTTPAddr)
		if err != nil {
			return &ConfigError{"http", err.Error()}
		}
		n.httpLn = connlimit.New(httpLn, n.cfg.MaxClients, httpRefusal)
	}
	if !n.cfg.RESPOff {
		if n.respLn, err = n.cfg.Listen("tcp", n.cfg.RESPAddr); err != nil {
			return &ConfigError{"resp", err.Error()}
		}
	}
	if err := n.listenTLS(); err != nil {
		return err
	}
	if n.cfg.RESPCluster != "" {
		if n.respClusterLn, err = n.cfg.Listen("tcp", n.cfg.RESPCluster); err != nil {
			return &ConfigError{"resp-cluster", err.Error()}
		}
	}
	if n.rpcLn, err = n.cfg.Listen("tcp", n.cfg.RPCAddr); err != nil {
		return &ConfigError{"rpc", err.Error()}
	}
	n.rpcLn = connlimit.New(n.rpcLn, maxPeerConns, "")
	if n.cfg.Pprof {
		h = withPprof(h, httpapi.NewAuthorizer(n.cfg.Token, n.authLimiter))
	}
	if n.cfg.RLSHTTP {
		h = n.withRLSHTTP(h)
	}
	n.httpSrv = &http.Server{Handler: h, ReadTimeout: n.cfg.HTTPReadTimeout,
		ReadHeaderTimeout: n.httpHeaderTimeout(),
		WriteTimeout:      n.cfg.HTTPWriteTimeout, IdleTimeout: DefaultHTTPIdleTimeout,
		MaxHeaderBytes: n.cfg.HTTPMaxHeaderBytes}
	return n.listenGRPC()
}

func (n *Node) serve() {
	n.serving.Add(1)
	go func() {
		defer n.serving.Done()
		if err := n.rpcSrv.Serve(n.rpcLn); err != nil && !errors.Is(err, rpc.ErrClosed) {
			n.cfg.Logger.Error("rpc server stopped", "err", err)
		}
	}()
	if n.httpLn != nil {
		n.serving.Add(1)
		go func() {
			defer n.serving.Done()
			if err := n.httpSrv.Serve(n.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.cfg.Logger.Error("http server stopped", "err", err)
			}
		}()
	}
	if n.respLn != nil {
		n.serving.Add(1)
		go func() {
			defer n.serving.Done()
			if err := n.resp.Serve(n.respLn); err != nil && !errors.Is(err, net.ErrClosed) {
				n.cfg.Logger.Debug("resp server stopped", "err", err)
			}
		}()
	}
	n.serveTLS()
	n.serveGRPC()
	if n.respClusterLn != nil {
		n.serving.Add(1)
		go func() {
			defer n.serving.Done()
			if err := n.serveRESPCluster(); err != nil && !errors.Is(err, net.ErrClosed) {
				n.cfg.Logger.Debug("resp cluster server stopped", "err", err)
			}
		}()
	}
}

// serveRESPCluster serves --resp-cluster, or --resp-cluster-tls over TLS.
func (n *Node) serveRESPCluster() error {
	if n.respClusterTLS {
		return n.resp.ServeTLS(n.respClusterLn, n.tlsConfig(nil), true)
	}
	return n.resp.ServeCluster(n.respClusterLn)
}

// httpRefusal is the answer to an HTTP connection over --max-clients.
var httpRefusal = func() string {
	const body = `{"error":"max number of clients reached"}` + "\n"
	return fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

// closeListeners closes every listener opened, when Start fails, and stops watching
// the client TLS files, which only the listeners use.
func (n *Node) closeListeners() {
	if n.httpLn != nil {
		n.httpLn.Close()
	}
	if n.httpTLSLn != nil {
		n.httpTLSLn.Close()
	}
	for _, ln := range []net.Listener{n.respLn, n.respTLSLn, n.respClusterLn, n.rpcLn, n.grpcLn, n.grpcTLSLn} {
		if ln != nil {
			ln.Close()
		}
	}
	n.closeClientTLS()
}

// HTTPAddr is the address the HTTP API listens on (useful with port 0); "" with
// --http ”.
func (n *Node) HTTPAddr() string {
	if n.httpLn == nil {
		return ""
	}
	return n.httpLn.Addr().String()
}

// RESPAddr is the address the RESP API listens on; "" with --resp ”.
func (n *Node) RESPAddr() string { return addrOf(n.respLn) }

// RESPClusterAddr is the address of the RESP listener for Redis Cluster clients ("" without --resp-cluster).
func (n *Node) RESPClusterAddr() string {
	if n.respClusterLn == nil {
		return ""
	}
	return n.respClusterLn.Addr().String()
}

// RPCAddr is the address the node-to-node protocol listens on.
func (n *Node) RPCAddr() string { return n.rpcLn.Addr().String() }

// GossipAddr is the address memberlist is bound to.
func (n *Node) GossipAddr() string { return n.cluster.LocalAddr() }

// Name is the node's member name.
func (n *Node) Name() string { return n.cfg.Name }

// Store is the node's counter store.
func (n *Node) Store() *leaparray.Store { return n.store }

// Do decides ops as a client request to this node would be (tests call it in-process).
func (n *Node) Do(ctx context.Context, ops []counter.Op, results []counter.Result) {
	counter.Do(ctx, n.router, ops, results)
}

// RedisStatus is "off" without --redis, else "up" or "down" (its breaker's view).
func (n *Node) RedisStatus() string { return n.redisStatus() }

// Holding reports how many partitions this node owns in its ring and how many of them
// it can decide now.
func (n *Node) Holding() (owned, held int) { return n.owner.Holding() }

// HandingOn reports how many partitions have counters on their way to or from this
// node (see owner.Owner.HandingOn): until none, a count may miss them.
func (n *Node) HandingOn() int { return n.owner.HandingOn() }

// Unwritten reports how many counters have deltas this node has not written to Redis
// yet (see owner.Owner.Unwritten): until none, another node's count may miss them.
func (n *Node) Unwritten() int { return n.owner.Unwritten() }

// LatePolls reports how many times this node has read the late-write marks (tests wait
// for every node to read them after the last write).
func (n *Node) LatePolls() uint64 { return n.owner.LatePolls() }

// Router is the node's router (tests compare rings).
func (n *Node) Router() *route.Router { return n.router }

// RPCStats are the node's forwarding counts (frames and ops sent to peers).
func (n *Node) RPCStats() rpc.Stats { return n.rpcClient.Stats() }

// Voters are the members whose lease grants count, as this node knows them (sorted).
func (n *Node) Voters() []string { return n.keeper.Voters() }

// LeaseStats are the node's lease totals (heartbeats sent and answered, grants, lapses).
func (n *Node) LeaseStats() lease.Stats { return n.keeper.Stats() }

// Cluster is the node's membership.
func (n *Node) Cluster() *cluster.Cluster { return n.cluster }

// every runs f every d on a goroutine of its own until the node stops.
func (n *Node) every(d time.Duration, f func()) {
	n.loops.Add(1)
	go func() {
		defer n.loops.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-n.quit:
				return
			case <-t.C:
				f()
			}
		}
	}()
}

// sweepLoop forgets idle counters a little at a time, so that a full pass over the
// store takes about ten intervals and no shard is locked for long; once the store has
// shrunk a lot, it gives the freed memory back to the operating system (memReturn). It
// also keeps the collector's headroom in step with the store (gcGoal).
func (n *Node) sweepLoop() {
	defer n.loops.Done()
	t := time.NewTicker(n.cfg.SweepInterval)
	defer t.Stop()
	mem := memReturn{every: memReturnEvery, minFall: memReturnMinFall}
	gc := newGCGoal(n.cfg.GCHeadroom)
	for {
		select {
		case <-n.quit:
			return
		case <-t.C:
			n.store.Sweep(n.cfg.Now(), max(4096, n.store.Len()/10))
			if held := n.store.Bytes(); mem.after(held, time.Now()) {
				start := time.Now()
				debug.FreeOSMemory()
				n.cfg.Logger.Info("memory freed by the sweep given back to the OS", "store_bytes", held,
					"took", time.Since(start).Round(time.Millisecond))
			}
			gc.update(leaparray.MappedBytes(), time.Now())
		}
	}
}
