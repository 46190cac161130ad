package fallback

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/wait"
)

// Marks count per partition; the sequence moves with every mark, LateMarks returns no
// marks while it has not, and a Redis that lost the marks reads sequence 0, none.
func TestLateMarks(t *testing.T) {
	srv, st := startStore(t)
	ctx := context.Background()
	seq, marks, err := st.LateMarks(ctx, 16, -1)
	if err != nil || seq != 0 || len(marks) != 0 {
		t.Fatalf("before any mark: got %d, %v, %v; want 0, none", seq, marks, err)
	}
	if err := st.MarkLate(ctx, 16, []int{3, 5}); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkLate(ctx, 16, []int{3}); err != nil {
		t.Fatal(err)
	}
	seq, marks, err = st.LateMarks(ctx, 16, 0)
	if want := map[int]int64{3: 2, 5: 1}; err != nil || seq != 2 || !maps.Equal(marks, want) {
		t.Fatalf("after two marks: got %d, %v, %v; want 2, %v", seq, marks, err, want)
	}
	if seq, marks, err = st.LateMarks(ctx, 16, 2); err != nil || seq != 2 || marks != nil {
		t.Fatalf("nothing new: got %d, %v, %v; want 2, nil", seq, marks, err)
	}
	if _, marks, _ = st.LateMarks(ctx, 32, -1); len(marks) != 0 {
		t.Fatalf("another partition count's marks: got %v; want none", marks)
	}
	srv.Restart() // empty
	if err := wait.Until(10*time.Second, func() (err error) {
		seq, marks, err = st.LateMarks(ctx, 16, 2)
		return err
	}); err != nil || seq != 0 || marks == nil || len(marks) != 0 {
		t.Fatalf("after Redis lost them: got %d, %v, %v; want 0, none", seq, marks, err)
	}
}
