package route

import (
	"errors"

	"github.com/leapcount/leapcount/counter"
)

// failPolicy answers the allow ops that nobody could decide (their owner is
// unavailable, or full: it holds its most counters and this one is new), or whose
// outcome is unknown, as FailOpen says.
func (r *Router) failPolicy(ops []counter.Op, results []counter.Result) {
	for i := range ops {
		if err := results[i].Err; decidesAllow(&ops[i]) && failsOver(err) {
			results[i] = r.policyAnswer(&ops[i], err)
		}
	}
}

// decidesAllow reports whether op is an allow (a Borrow, a node's ask for a slice, is
// no client's: its error stays an error).
func decidesAllow(op *counter.Op) bool { return op.Kind == counter.Allow }

// failsOver reports whether an allow that failed with err gets the fail policy's
// answer instead of the error.
func failsOver(err error) bool {
	return err != nil && (errors.Is(err, counter.ErrUnavailable) || errors.Is(err, counter.ErrOutcomeUnknown) ||
		errors.Is(err, counter.ErrFull))
}

// PolicyAnswer is what op, answered err by its owner (or with its outcome unknown),
// gets: the fail policy's answer (open: allowed; else denied), marked (Undecided, count
// and remaining -1) so that no client or checker takes it for a decision, when op is an
// allow that nobody could decide; else the error. policy reports which.
func PolicyAnswer(op *counter.Op, err error, open bool) (res counter.Result, policy bool) {
	if !decidesAllow(op) || !failsOver(err) {
		return counter.Result{Err: err}, false
	}
	res = counter.Result{Count: -1, Remaining: -1, Undecided: err}
	if open {
		res.Allowed = true
	} else {
		res.RetryAfterMs = op.Window / int64(max(op.Buckets, 1)) // ask again after one bucket
	}
	return res, true
}

// policyAnswer is PolicyAnswer with FailOpen, counted for FailPolicyAnswers.
func (r *Router) policyAnswer(op *counter.Op, err error) counter.Result {
	res, _ := PolicyAnswer(op, err, r.FailOpen)
	if r.FailOpen {
		r.failedOpen.Add(1)
	} else {
		r.failedClosed.Add(1)
	}
	return res
}

// FailPolicyAnswers is how many allow ops the fail policy has answered so far, allowed
// (open) and denied (closed).
func (r *Router) FailPolicyAnswers() (open, closed uint64) {
	return r.failedOpen.Load(), r.failedClosed.Load()
}
