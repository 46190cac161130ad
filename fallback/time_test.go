package fallback

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/testkit/testredis"
)

// Time reads Redis's clock (the same machine's here: within a second of ours), and
// fails as any call does once Redis is gone.
func TestTime(t *testing.T) {
	srv, st := startStore(t)
	before := time.Now().UnixMicro()
	got, err := st.Time(context.Background())
	after := time.Now().UnixMicro()
	if err != nil || got < before-int64(time.Second/time.Microsecond) || got > after+int64(time.Second/time.Microsecond) {
		t.Fatalf("Time() = %d, %v; want within a second of [%d, %d]", got, err, before, after)
	}
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := st.Time(ctx); !errors.Is(err, counter.ErrUnavailable) {
		t.Fatalf("Time() with Redis stopped: %v; want ErrUnavailable", err)
	}
}

// In a Redis Cluster, Time reads one master's clock.
func TestTimeInACluster(t *testing.T) {
	nodes := testredis.StartCluster(t, 3)
	st := open(t, testredis.ClusterURL(nodes), Config{})
	before := time.Now().UnixMicro()
	got, err := st.Time(context.Background())
	after := time.Now().UnixMicro()
	if err != nil || got < before-int64(time.Second/time.Microsecond) || got > after+int64(time.Second/time.Microsecond) {
		t.Fatalf("Time() = %d, %v; want within a second of [%d, %d]", got, err, before, after)
	}
}
