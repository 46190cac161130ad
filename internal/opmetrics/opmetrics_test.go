package opmetrics

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leapcount/leapcount/counter"
)

// Each front end's series live in one family; service errors are counted by class,
// bad input and success not at all.
func TestErrorsAreCountedByClassPerFrontEnd(t *testing.T) {
	reg := prometheus.NewRegistry()
	http, err := New(reg, "http")
	if err != nil {
		t.Fatal(err)
	}
	grpc, err := New(reg, "grpc")
	if err != nil {
		t.Fatal(err)
	}
	http.Note(nil)
	http.Note(fmt.Errorf("%w: x", counter.ErrBadWindow))
	http.Note(fmt.Errorf("%w: owner gone", counter.ErrUnavailable))
	grpc.Note(fmt.Errorf("%w: no answer", counter.ErrOutcomeUnknown))
	grpc.Note(fmt.Errorf("%w: no answer", counter.ErrOutcomeUnknown))
	for want, c := range map[float64]prometheus.Counter{1: http.failed, 0: http.unknown, 2: grpc.unknown} {
		if got := testutil.ToFloat64(c); got != want {
			t.Errorf("got %v; want %v", got, want)
		}
	}
	if n := testutil.CollectAndCount(reg, "leapcount_op_errors_total"); n != 4 {
		t.Errorf("%d series; want 4 (two front ends, two classes)", n)
	}
}
