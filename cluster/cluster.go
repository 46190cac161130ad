package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// ErrShutdown is returned by calls that need the gossip layer after Shutdown.
var ErrShutdown = errors.New("cluster: shut down")

// Cluster is the local member of a gossip cluster. Its methods are safe for
// concurrent use.
type Cluster struct {
	name      string
	localAddr string
	bindAddr  string     // BindAddr as configured: a seed equal to it is this member
	port      int        // the gossip port bound: a seed without a port means it
	lookup    LookupHost // resolves seed names
	registry  Registry   // lists members no seed names; nil: none
	log       *slog.Logger
	ml        *memberlist.Memberlist
	tab       *table
	del       *delegate
	versions  versions // members' versions heard in push-pulls (versions.go)

	joinCtx     context.Context // cancelled to end the join loop (and a lookup under way)
	stopJoin    context.CancelFunc
	joinDone    sync.WaitGroup
	initialDone chan struct{}                  // closed when the first join succeeded or gave up (tests)
	joinFails   atomic.Uint64                  // join calls no seed answered (JoinFailures)
	refutes     atomic.Uint64                  // see Refutes
	seeds       atomic.Pointer[seedResolution] // the last resolution of the seeds (SeesEverySeed)

	// mu orders Leave, MarkLeaving and Shutdown: memberlist panics on Leave after
	// Shutdown.
	mu       sync.Mutex
	shutdown bool
	stopOnce sync.Once
}

// Start creates the local member, listening for gossip on cfg.BindAddr, and starts
// joining cfg.Join in the background; Joined tells when a peer is known.
func Start(cfg Config) (c *Cluster, err error) {
	if cfg.Transport != nil {
		// Start owns the transport, so a failed start must not leave it bound.
		defer func() {
			if err != nil {
				_ = cfg.Transport.Shutdown()
			}
		}()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c = &Cluster{
		name:        cfg.Name,
		log:         cfg.Logger.With("component", "cluster", "member", cfg.Name),
		tab:         newTable(cfg.Name),
		bindAddr:    cfg.BindAddr,
		lookup:      cfg.LookupHost,
		registry:    cfg.Registry,
		initialDone: make(chan struct{}),
	}
	inc := cfg.Incarnation
	if inc == 0 {
		inc = uint64(time.Now().UnixNano())
	}
	c.del = &delegate{meta: meta{rpcAddr: cfg.RPCAddr, clientAddr: cfg.ClientAddr, zone: cfg.Zone, features: cfg.Features, incarnation: inc},
		state: encodeVersion(cfg.Name, cfg.Version), heard: &c.versions,
		known: func(name string) bool { _, ok := c.tab.get(name); return ok }}
	c.versions.set(cfg.Name, cfg.Version)
	mc, err := c.memberlistConfig(cfg)
	if err != nil {
		return nil, err
	}
	// Create announces us (NodeMeta, NotifyJoin for ourselves) before it returns,
	// which is why the table and delegate exist first.
	c.ml, err = memberlist.Create(mc)
	if err != nil {
		if cfg.Transport == nil && mc.Transport != nil {
			_ = mc.Transport.Shutdown() // our own: the deferred shutdown is for the caller's
		}
		return nil, fmt.Errorf("cluster: start gossip on %s: %w", cfg.BindAddr, err)
	}
	c.localAddr = net.JoinHostPort(mc.AdvertiseAddr, strconv.Itoa(mc.AdvertisePort))
	if self, ok := c.tab.get(c.name); ok {
		c.localAddr = self.Addr
	}
	c.port = mc.BindPort
	c.joinCtx, c.stopJoin = context.WithCancel(context.Background())
	// Seeds given as this member's own address are dropped now; names are resolved,
	// and their addresses filtered the same way, at each join attempt.
	seeds := c.otherSeeds(cfg.Join)
	alone := len(seeds) == 0 && c.registry == nil
	c.seeds.Store(&seedResolution{resolved: alone})
	if alone {
		// The first member of a cluster: nobody to join, nothing to wait for.
		c.tab.markJoined()
	}
	c.joinDone.Add(1)
	go c.joinLoop(seeds, cfg.JoinRetry, cfg.RejoinInterval)
	if c.registry != nil {
		c.joinDone.Add(1)
		go c.listLoop(cmp.Or(max(cfg.RejoinInterval, 0), DefaultRejoinInterval))
	}
	return c, nil
}

// memberlistConfig builds a fresh memberlist.Config: memberlist writes into the one
// it is given (the bound port, the keyring), so configs are never shared.
func (c *Cluster) memberlistConfig(cfg Config) (*memberlist.Config, error) {
	mc := memberlist.DefaultLANConfig()
	cfg.Timings.apply(mc)
	mc.Name = cfg.Name
	host, port, _ := net.SplitHostPort(cfg.BindAddr)
	bindIP, err := resolveHost(host, "0.0.0.0")
	if err != nil {
		return nil, fmt.Errorf("cluster: BindAddr: %w", err)
	}
	mc.BindAddr = bindIP
	mc.BindPort, _ = strconv.Atoi(port)
	mc.AdvertisePort = mc.BindPort // memberlist rewrites both when the port is 0
	if cfg.AdvertiseAddr != "" {
		advHost, advPort, err := net.SplitHostPort(cfg.AdvertiseAddr)
		if err != nil {
			advHost, advPort = cfg.AdvertiseAddr, ""
		}
		if mc.AdvertiseAddr, err = resolveHost(advHost, ""); err != nil {
			return nil, fmt.Errorf("cluster: AdvertiseAddr: %w", err)
		}
		if advPort != "" {
			if mc.AdvertisePort, err = strconv.Atoi(advPort); err != nil {
				return nil, fmt.Errorf("cluster: AdvertiseAddr: bad port %q", advPort)
			}
		}
	}
	// A dead member's name may be taken at once by a node at another address: names
	// are unique, so that is the same node, restarted (say, with a new IP).
	mc.DeadNodeReclaimTime = time.Nanosecond
	mc.Label = cfg.Label
	if len(cfg.Keys) > 0 {
		if mc.Keyring, err = memberlist.NewKeyring(cfg.Keys[1:], cfg.Keys[0]); err != nil {
			return nil, fmt.Errorf("cluster: Keys: %w", err)
		}
	}
	mc.Delegate = c.del
	ev := &events{tab: c.tab, log: c.log}
	mc.Events, mc.Conflict = ev, ev
	mc.Logger = newStdLogger(c.log.With("component", "memberlist"), &c.refutes)
	// A transport given is bound already: memberlist leaves BindAddr and BindPort
	// alone. Without one, a specific bind IP gets memberlist's own transport dialing
	// from that IP; 0.0.0.0 leaves memberlist to bind its own.
	mc.Transport = cfg.Transport
	if mc.Transport == nil && specificIP(mc.BindAddr) {
		tr, port, err := bindTransport(mc.BindAddr, mc.BindPort, mc)
		if err != nil {
			return nil, fmt.Errorf("cluster: start gossip on %s: %w", cfg.BindAddr, err)
		}
		if mc.AdvertisePort == mc.BindPort {
			mc.AdvertisePort = port
		}
		mc.BindPort, mc.Transport = port, tr
	}
	return mc, nil
}

// resolveHost returns host as an IP string (memberlist binds and advertises IPs
// only), preferring IPv4; an empty host gives def.
func resolveHost(host, def string) (string, error) {
	if host == "" {
		return def, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.String(), nil
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return "", fmt.Errorf("cannot resolve %q: %v", host, err)
	}
	for _, ip := range ips {
		if ip.To4() != nil {
			return ip.String(), nil
		}
	}
	return ips[0].String(), nil
}
