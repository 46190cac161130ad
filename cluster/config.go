package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// Defaults for Config.
const (
	DefaultRejoinInterval = 5 * time.Second
	DefaultJoinInitial    = 250 * time.Millisecond
	DefaultJoinMax        = 10 * time.Second
)

// Config describes the local member. Start does not keep a reference to it.
type Config struct {
	Name          string // unique member name
	BindAddr      string // gossip host:port, TCP and UDP; port 0 picks a free port (see LocalAddr)
	AdvertiseAddr string // host (or host:port) peers use to reach our gossip port; empty: the bound address
	RPCAddr       string // node-to-node address, host:port, advertised to peers in metadata
	ClientAddr    string // where Redis Cluster clients reach this node, host:port, advertised too (optional)
	// Zone is this member's failure domain (a rack, an availability zone; optional, at
	// most 16 bytes of letters, digits, '.', '_' and '-'), told to the others: the voters
	// spread over the zones. A member with a zone is unreadable to releases before zones.
	Zone string
	// Features are bits (at most 7: below 128) this member tells the others it
	// supports, read as Member.Features; what they mean is the caller's. Releases
	// before features ignore them.
	Features uint8
	// Join lists gossip addresses of existing members: host:port (a host alone means
	// this member's gossip port). A host name stands for every address it resolves to,
	// resolved again at each join and re-join (see LookupHost), so one DNS name with a
	// record per member, such as a Kubernetes headless Service, is a whole seed list.
	Join []string
	// LookupHost resolves the host names in Join; nil: the system's resolver.
	LookupHost LookupHost
	// Registry, when set, is a list of members kept outside the cluster (Redis): this
	// member lists itself there at every join attempt and re-join, and the addresses the
	// others listed are seeds as Join's are. It is for members that no name lists, such
	// as the replicas of a Deployment behind one Service.
	Registry Registry

	// RejoinInterval is how often the seeds not seen and the members seen to die are
	// joined again once the first join is over, so that the sides of a healed network
	// partition find each other (memberlist alone does not look for dead members). 0
	// means DefaultRejoinInterval; a negative value turns re-joining off.
	RejoinInterval time.Duration
	JoinRetry      Backoff // the first join's retries
	Timings        Timings // failure detection and gossip pace; zero fields: memberlist's LAN defaults
	Logger         *slog.Logger

	// Keys, when given, encrypt and authenticate all gossip (AES-GCM, memberlist's
	// keyring): a packet or stream without one of them is dropped. Keys[0] encrypts; all
	// of them decrypt, so a key can be rotated in steps. Each is 16, 24 or 32 bytes.
	Keys [][]byte
	// Label is the cluster's name, put on every gossip packet and stream: a member with
	// another label is ignored (with Keys, it is also authenticated data of the GCM).
	Label string

	// Version is this member's build version, told to the others (Member.Version);
	// at most 64 bytes.
	Version string
	// Incarnation names this run of the member, in its metadata: a restart under the
	// same name must have another (0: the start time in ns).
	Incarnation uint64
	// Transport, when set, carries gossip instead of memberlist's own UDP/TCP sockets
	// (tests put members on an in-process network, internal/testkit/netsim). BindAddr and
	// AdvertiseAddr still name this member's address: they are handed to the
	// transport's FinalAdvertiseAddr, which decides what is advertised. Start owns
	// the transport: Shutdown shuts it down, and so does a Start that fails.
	Transport memberlist.NodeAwareTransport
}

// Backoff paces the first join: tries Initial apart, doubling up to Max, until a seed
// answers or Attempts tries have failed. After that the seeds are re-joined every
// RejoinInterval.
type Backoff struct {
	Initial  time.Duration // 0: DefaultJoinInitial
	Max      time.Duration // 0: DefaultJoinMax
	Attempts int           // 0: until a seed answers
}

func (c Config) withDefaults() Config {
	if c.RejoinInterval == 0 {
		c.RejoinInterval = DefaultRejoinInterval
	}
	if c.JoinRetry.Initial == 0 {
		c.JoinRetry.Initial = DefaultJoinInitial
	}
	if c.JoinRetry.Max == 0 {
		c.JoinRetry.Max = max(DefaultJoinMax, c.JoinRetry.Initial)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.LookupHost == nil {
		c.LookupHost = defaultLookup
	}
	return c
}

// Validate reports every invalid field, each error naming its field.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("cluster: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Name == "" || len(c.Name) > 128 {
		bad("Name", "%q must be 1 to 128 bytes", c.Name)
	}
	if len(c.Version) > maxVersionLen {
		bad("Version", "%q is over %d bytes", c.Version, maxVersionLen)
	}
	if err := checkHostPort(c.BindAddr, false); err != nil {
		bad("BindAddr", "%v", err)
	}
	if c.AdvertiseAddr != "" && strings.ContainsAny(c.AdvertiseAddr, " \t\n") {
		bad("AdvertiseAddr", "%q is not a host", c.AdvertiseAddr)
	}
	if err := checkRPCAddr(c.RPCAddr); err != nil {
		bad("RPCAddr", "%v", err)
	}
	if c.ClientAddr != "" {
		if err := checkRPCAddr(c.ClientAddr); err != nil {
			bad("ClientAddr", "%v", err)
		}
	}
	if c.Features > maxFeatures {
		bad("Features", "%#x: at most 7 bits (below %#x)", c.Features, maxFeatures+1)
	}
	if !validZone(c.Zone) {
		bad("Zone", "%q must be at most %d bytes of letters, digits, '.', '_' and '-'", c.Zone, maxZone)
	}
	for i, s := range c.Join {
		if _, _, err := splitSeed(s, 1); err != nil || strings.ContainsAny(s, " \t\n") {
			bad(fmt.Sprintf("Join[%d]", i), "%q is not an address", s)
		}
	}
	if c.JoinRetry.Initial < 0 || c.JoinRetry.Max < 0 || c.JoinRetry.Attempts < 0 {
		bad("JoinRetry", "negative values: %+v", c.JoinRetry)
	}
	for i, k := range c.Keys {
		if err := memberlist.ValidateKey(k); err != nil {
			bad(fmt.Sprintf("Keys[%d]", i), "%v", err)
		}
	}
	if len(c.Label) > 255 {
		bad("Label", "%d bytes: at most 255", len(c.Label))
	}
	errs = append(errs, c.Timings.validate()...)
	return errors.Join(errs...)
}

// checkHostPort accepts host:port with a numeric port (0 allowed unless needPort).
func checkHostPort(s string, needPort bool) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || (needPort && p == 0) {
		return fmt.Errorf("%q: bad port %q", s, port)
	}
	return nil
}

// checkRPCAddr accepts what a peer (or client) can dial: a concrete host and a
// non-zero port, short enough to fit the metadata.
func checkRPCAddr(s string) error {
	if len(s) > maxAddr {
		return fmt.Errorf("%q is longer than %d bytes", s, maxAddr)
	}
	if err := checkHostPort(s, true); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(s)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("%q: peers cannot dial host %q", s, host)
	}
	return nil
}

// validZone reports whether z can be a zone: empty, or a short label.
func validZone(z string) bool {
	if len(z) > maxZone {
		return false
	}
	for _, r := range z {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
