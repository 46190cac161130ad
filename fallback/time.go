package fallback

import (
	"context"
	"time"
)

// Time reads Redis's clock (TIME), µs since the Unix epoch: the owner measures its
// counters' clock against it (owner/clock.go). In a Redis Cluster it is one master's
// clock, whichever the client asks.
func (st *Store) Time(ctx context.Context) (int64, error) {
	var t time.Time
	err := st.guard(ctx, func() error {
		var err error
		t, err = st.rdb.Time(ctx).Result()
		return err
	})
	if err != nil {
		return 0, unavailable("time", err)
	}
	return t.UnixMicro(), nil
}
