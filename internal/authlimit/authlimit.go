// Package authlimit limits failed guesses of a secret (the client token) per source
// address, for every front end at once: RESP's AUTH and HELLO AUTH and HTTP's bearer
// token share one Limiter, so a guesser has one budget however it asks.
//
// Each source has a token bucket of Burst wrong guesses that refills at one per Every
// (defaults: 10, then one a second). Every guess is checked first; a right one never
// reaches the Limiter, so it is never refused, whatever wrong guesses came from its
// address (another client behind the same proxy, a client with an old token). A wrong
// one spends one of its source's budget (Wrong), and once none is left the caller
// answers it "too many" and says when to retry, rather than "wrong". That does not slow
// a guesser down, who learns a right guess by its being accepted either way: what keeps
// the token from being guessed is its length. It makes guessing stand out (Refused,
// and the callers' metrics), and costs a RESP guesser its connection.
//
// The bucket is GCRA's form of it, one time per source (when its bucket is full
// again), written here rather than taken from golang.org/x/time/rate, whose Limiter
// per source would be a mutex and four fields for what one int64 holds. A source is
// an IPv4 address, or an IPv6 address's /64 (what one host is usually given). The
// map of sources is bounded (MaxSources): a bucket that is full again is dropped, as
// it is the same as no entry; when the map is full of buckets still refilling (a
// flood of guesses from that many sources), new sources share one overflow bucket
// until room is made, so the total guess rate stays bounded and known sources keep
// their own budgets.
package authlimit

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Defaults of Config's zero fields.
const (
	DefaultBurst      = 10
	DefaultEvery      = time.Second
	DefaultMaxSources = 1 << 16
)

// Config shapes a Limiter; zero fields take the defaults.
type Config struct {
	Burst      int              // wrong guesses a source may make at once
	Every      time.Duration    // then one more per Every
	MaxSources int              // sources remembered at most (the overflow bucket aside)
	Now        func() time.Time // nil: time.Now
}

// Limiter is safe for concurrent use.
type Limiter struct {
	every, burst time.Duration // burst: Burst·Every, the most a bucket may be behind
	maxSources   int
	now          func() time.Time
	start        time.Time

	mu        sync.Mutex
	full      map[netip.Addr]int64 // per source: when its bucket is full again, ns since start
	nextPrune int64                // the map is not scanned again before this
	refused   int64
}

// overflow is the key of the bucket shared by new sources while the map is full.
var overflow = netip.Addr{}

// New returns a Limiter.
func New(cfg Config) *Limiter {
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.MaxSources <= 0 {
		cfg.MaxSources = DefaultMaxSources
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Limiter{every: cfg.Every, burst: time.Duration(cfg.Burst) * cfg.Every, maxSources: cfg.MaxSources,
		now: cfg.Now, start: cfg.Now(), full: make(map[netip.Addr]int64)}
}

// Wrong spends one of src's budget on a guess that proved wrong. If src had none left,
// ok is false: the guess is answered "too many", and retry is how long until src has
// one again.
func (l *Limiter) Wrong(src netip.Addr) (ok bool, retry time.Duration) {
	now := int64(l.now().Sub(l.start))
	l.mu.Lock()
	defer l.mu.Unlock()
	key := src
	full, known := l.full[key]
	if !known && len(l.full) >= l.maxSources && !l.makeRoom(now) {
		key = overflow
		full = l.full[key]
	}
	next := max(full, now) + int64(l.every)
	if over := time.Duration(next-now) - l.burst; over > 0 {
		l.refused++
		return false, over
	}
	l.full[key] = next
	return true, 0
}

// makeRoom drops the buckets that are full again, at most once per Every (a scan of
// the whole map), and reports whether there is room for a new source.
func (l *Limiter) makeRoom(now int64) bool {
	if now >= l.nextPrune {
		l.nextPrune = now + int64(l.every)
		for src, full := range l.full {
			if full <= now {
				delete(l.full, src)
			}
		}
	}
	return len(l.full) < l.maxSources
}

// Refused is how many wrong guesses Wrong found over their source's budget.
func (l *Limiter) Refused() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused
}

// Sources is how many buckets the Limiter holds (sources still refilling).
func (l *Limiter) Sources() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.full)
}

// Source is the key of a client's address: its IPv4 address (also when written as
// IPv4-in-IPv6), or its IPv6 address's /64. An address that is not IP (a Unix
// socket, say) is the zero Addr, one source for all.
func Source(addr net.Addr) netip.Addr {
	if a, ok := addr.(*net.TCPAddr); ok {
		return sourceOf(a.AddrPort().Addr())
	}
	return SourceString(addr.String())
}

// SourceString is Source of an address written as "host:port" or "host", as
// net/http's Request.RemoteAddr and redcon's RemoteAddr give it.
func SourceString(hostport string) netip.Addr {
	if ap, err := netip.ParseAddrPort(hostport); err == nil {
		return sourceOf(ap.Addr())
	}
	a, _ := netip.ParseAddr(hostport)
	return sourceOf(a)
}

func sourceOf(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}
