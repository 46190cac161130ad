package fallback

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// Stamps only rise, a partition never stamped reads 0, and the epoch is the first
// writer's until Redis loses the stamps.
func TestPartitionStamps(t *testing.T) {
	srv, st := startStore(t)
	ctx := context.Background()
	if got, err := st.Written(ctx, 16, []int{1, 2}); err != nil || !slices.Equal(got, []int64{0, 0}) {
		t.Fatalf("before any stamp: got %v, %v; want [0 0]", got, err)
	}
	e1, err := st.StampWritten(ctx, 16, []int{1, 2}, 500, "first")
	if err != nil || e1 != "first" {
		t.Fatalf("first stamp: epoch %q, %v; want first", e1, err)
	}
	if e, err := st.StampWritten(ctx, 16, []int{1, 3}, 400, "second"); err != nil || e != "first" {
		t.Fatalf("second stamp: epoch %q, %v; want first", e, err)
	}
	if got, err := st.Written(ctx, 16, []int{1, 2, 3, 4}); err != nil || !slices.Equal(got, []int64{500, 500, 400, 0}) {
		t.Fatalf("stamps: got %v, %v; want [500 500 400 0]", got, err)
	}
	if got, err := st.Written(ctx, 32, []int{1}); err != nil || got[0] != 0 {
		t.Fatalf("another partition count's stamps: got %v, %v; want [0]", got, err)
	}
	srv.Restart() // empty
	var e string
	if err := wait.Until(10*time.Second, func() (err error) {
		e, err = st.StampWritten(ctx, 16, []int{1}, 600, "third")
		return err
	}); err != nil || e != "third" {
		t.Fatalf("stamp after Redis lost them: epoch %q, %v; want third", e, err)
	}
}
