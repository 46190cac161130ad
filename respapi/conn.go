package respapi

import (
	"errors"
	"net"
	"time"
)

// Defaults of Config's zero fields.
const (
	DefaultMaxUnanswered = 1 << 20
	DefaultWriteTimeout  = 30 * time.Second
	DefaultAuthTimeout   = 10 * time.Second
)

var errTooLarge = &protocolError{"request too large"}

// Why the server drops a connection that times out, as the metrics name it.
const (
	dropIdle   = "idle"            // nothing read for IdleTimeout
	dropNoAuth = "unauthenticated" // no AUTH within AuthTimeout
	dropWrite  = "write_timeout"   // a reply not taken by the client within WriteTimeout
)

// connConfig is Config as every connection takes it, defaults filled in.
type connConfig struct {
	max   int64         // bytes a client may send without a reply
	idle  time.Duration // 0: no idle timeout
	write time.Duration // bound of each write
	auth  time.Duration // time to authenticate in; 0: no token, no deadline
}

func (cfg *Config) connConfig() connConfig {
	cc := connConfig{max: cfg.MaxUnanswered, idle: max(cfg.IdleTimeout, 0), write: cfg.WriteTimeout}
	if cc.max <= 0 {
		cc.max = DefaultMaxUnanswered
	}
	if cc.write <= 0 {
		cc.write = DefaultWriteTimeout
	}
	if cfg.Token != "" {
		if cc.auth = cfg.AuthTimeout; cc.auth <= 0 {
			cc.auth = DefaultAuthTimeout
		}
	}
	return cc
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
