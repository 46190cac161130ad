package fallback

import (
	"fmt"

	"github.com/leapcount/leapcount/counter"
	"github.com/redis/go-redis/v9"
)

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
