package main

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
)

// redisVars are the variables that shape the Redis connection: without REDIS_URL,
// leapcount uses no Redis, and refuses them.
var redisVars = []string{"REDIS_SOCKET_TYPE", "REDIS_TYPE", "REDIS_POOL_SIZE", "REDIS_AUTH", "REDIS_TLS", "REDIS_SENTINEL_AUTH", "REDIS_TIMEOUT"}

// mapRedis makes --redis of REDIS_URL: REDIS_TYPE single (a unix socket path or a
// host:port, by REDIS_SOCKET_TYPE), sentinel (<master>,<sentinel>,...) or cluster
// (<host:port>,...), with REDIS_AUTH, REDIS_TLS, REDIS_SENTINEL_AUTH, REDIS_POOL_SIZE
// and REDIS_TIMEOUT. Unset, the node runs without Redis (counters in memory only).
func mapRedis(e *rlEnv, m *rlMapping, _ func(string) (string, bool)) error {
	if !e.set["REDIS_URL"] {
		for _, name := range redisVars {
			if !e.isDefault(name) {
				return fmt.Errorf("%s=%s: REDIS_URL is not set, and leapcount then uses no Redis (counters in memory only): set REDIS_URL too, or unset it", name, e.str(name))
			}
		}
		return nil
	}
	u, err := redisURL(e)
	if err != nil {
		return err
	}
	m.flag("redis", u)
	return nil
}

// redisURL is the --redis URL the REDIS_* variables describe.
func redisURL(e *rlEnv) (string, error) {
	addrs := splitList(e.str("REDIS_URL"))
	u := &url.URL{User: userinfo(e.str("REDIS_AUTH"))}
	q := url.Values{}
	tls := e.on("REDIS_TLS")
	switch typ := strings.ToLower(e.str("REDIS_TYPE")); typ {
	case "single":
		if err := singleRedis(e, u, tls); err != nil {
			return "", err
		}
	case "sentinel":
		if len(addrs) < 2 {
			return "", fmt.Errorf("REDIS_URL=%s: REDIS_TYPE=sentinel wants <master name>,<sentinel host:port>,...", e.str("REDIS_URL"))
		}
		u.Scheme, u.Host = withTLS("redis", tls)+"+sentinel", addrs[1]
		q.Set("master", addrs[0])
		q["addr"] = addrs[2:]
		if a := userinfo(e.str("REDIS_SENTINEL_AUTH")); a != nil {
			q.Set("sentinel_username", a.Username())
			p, _ := a.Password()
			q.Set("sentinel_password", p)
		}
	case "cluster":
		u.Scheme, u.Host = withTLS("redis", tls)+"+cluster", addrs[0]
		q["addr"] = addrs[1:]
	default:
		return "", fmt.Errorf("REDIS_TYPE=%s: want single, sentinel or cluster", e.str("REDIS_TYPE"))
	}
	redisQuery(e, q)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// singleRedis fills u for REDIS_TYPE=single: REDIS_URL is a unix socket's path, or a
// host:port with REDIS_SOCKET_TYPE=tcp.
func singleRedis(e *rlEnv, u *url.URL, tls bool) error {
	addr := e.str("REDIS_URL")
	switch st := e.str("REDIS_SOCKET_TYPE"); st {
	case "unix":
		if !filepath.IsAbs(addr) {
			return fmt.Errorf("REDIS_URL=%s: with REDIS_SOCKET_TYPE=unix (the default) it is a socket's path: set REDIS_SOCKET_TYPE=tcp for host:port", addr)
		}
		if tls {
			return fmt.Errorf("REDIS_TLS=%s: leapcount does not speak TLS over a unix socket (REDIS_SOCKET_TYPE=unix)", e.str("REDIS_TLS"))
		}
		u.Scheme, u.Path = "unix", addr
	case "tcp", "tcp4", "tcp6":
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("REDIS_URL=%s: want host:port with REDIS_SOCKET_TYPE=%s", addr, st)
		}
		u.Scheme, u.Host = withTLS("redis", tls), addr
	default:
		return fmt.Errorf("REDIS_SOCKET_TYPE=%s: want unix or tcp", st)
	}
	return nil
}

// redisQuery adds REDIS_POOL_SIZE and REDIS_TIMEOUT, when set, to the URL's query.
func redisQuery(e *rlEnv, q url.Values) {
	if e.set["REDIS_POOL_SIZE"] {
		q.Set("pool_size", e.str("REDIS_POOL_SIZE"))
	}
	if e.set["REDIS_TIMEOUT"] {
		for _, k := range []string{"dial_timeout", "read_timeout", "write_timeout"} {
			q.Set(k, e.str("REDIS_TIMEOUT"))
		}
	}
}

func withTLS(scheme string, tls bool) string {
	if tls {
		return scheme + "s"
	}
	return scheme
}

// userinfo reads REDIS_AUTH's form, "password" or "user:password" (nil: empty).
func userinfo(auth string) *url.Userinfo {
	if auth == "" {
		return nil
	}
	if user, pass, ok := strings.Cut(auth, ":"); ok {
		return url.UserPassword(user, pass)
	}
	return url.UserPassword("", auth)
}
