package fallback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/leapcount/leapcount/counter"
	"github.com/redis/go-redis/v9"
)

// ErrRedisDown is why a call failed at once without trying Redis: the store's circuit
// breaker is open because Redis stopped answering (see the package doc). Errors that
// wrap it also wrap counter.ErrUnavailable.
var ErrRedisDown = errors.New("fallback: redis is down (circuit breaker open)")

// unavailable wraps a failure of Redis (down, slow, refusing) so that callers see
// counter.ErrUnavailable with errors.Is, and the cause with errors.Is/As too.
func unavailable(op string, err error) error {
	return fmt.Errorf("%w: redis %s: %w", counter.ErrUnavailable, op, err)
}

// isNoScript reports whether Redis did not have the script cached (a restart, a
// failover, SCRIPT FLUSH).
func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// reachability is what one exchange with Redis says about whether Redis can be
// reached, for the breaker.
type reachability int

const (
	reached   reachability = iota // Redis answered (an error reply too: a script error, WRONGTYPE)
	unreached                     // Redis could not be reached or did not answer in time
	neutral                       // says nothing about Redis (the caller gave up, the store is closed)
)

// classify tells Redis being unreachable (connection refused or reset, a timeout, a
// server that is loading or has lost its master or cluster) from everything else.
func classify(err error) reachability {
	switch {
	case err == nil:
		return reached
	case errors.Is(err, context.Canceled), errors.Is(err, redis.ErrClosed):
		return neutral
	case unreachable(err):
		return unreached
	}
	return reached
}

var downReplies = []string{"LOADING", "MASTERDOWN", "CLUSTERDOWN", "BUSY"}

func unreachable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	for _, p := range downReplies {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	// go-redis's own words when no server of a Sentinel or Cluster deployment answers.
	msg := err.Error()
	return strings.Contains(msg, "all sentinels specified in configuration are unreachable") ||
		strings.Contains(msg, "cluster has no nodes")
}
