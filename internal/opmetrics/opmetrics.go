// Package opmetrics counts the ops a front end could not answer with a decision, by
// class, in one family every front end shares: leapcount_op_errors_total{frontend,
// class}, class "failed" (not decided: the owner unavailable, the store full, the node
// stopping) or "unknown" (sent to the owner and no answer came back: it may have been
// applied). Bad input is the client's and is counted by each front end's own metrics.
package opmetrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leapcount/leapcount/counter"
)

// Errors counts one front end's op errors.
type Errors struct {
	failed, unknown prometheus.Counter
}

// New registers frontend's series on reg (nil: nowhere); both classes start at 0.
func New(reg prometheus.Registerer, frontend string) (*Errors, error) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "leapcount_op_errors_total",
		Help:        "Ops a front end answered with an error that is not the client's, by class: failed (not decided), unknown (sent to the owner, no answer came back: it may have been applied).",
		ConstLabels: prometheus.Labels{"frontend": frontend},
	}, []string{"class"})
	if reg != nil {
		if err := reg.Register(vec); err != nil {
			return nil, err
		}
	}
	return &Errors{failed: vec.WithLabelValues("failed"), unknown: vec.WithLabelValues("unknown")}, nil
}

// Note counts err when it is a service error (nil and bad input are not).
func (e *Errors) Note(err error) {
	switch {
	case e == nil || err == nil || counter.IsBadInput(err):
	case errors.Is(err, counter.ErrOutcomeUnknown):
		e.unknown.Inc()
	default:
		e.failed.Inc()
	}
}
