package respapi

import (
	"errors"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/internal/opmetrics"
)

// Outcomes of a command, as the metrics label them.
const (
	outcomeOK         = iota // answered
	outcomeBadRequest        // the client's mistake: bad input, unknown command, no auth
	outcomeFailed            // the service's: the counter was unavailable, the node stopping
	outcomeUnknown           // sent to its owner, no answer came back: it may have been applied
	outcomes
)

var outcomeNames = [outcomes]string{"ok", "bad_request", "failed", "unknown"}

// Why the server ends a connection itself, besides the timeouts (dropIdle, dropNoAuth,
// dropWrite), as the metrics name it.
const (
	dropProtocol    = "protocol"       // broke the framing, or sent too much without reading a reply
	dropAuthLimited = "auth_limited"   // AUTH from a source over its budget of failed guesses
	dropUnread      = "unread_replies" // left more than maxUnwritten of its replies unread
	dropTLS         = "tls_handshake"  // a TLS port's handshake failed or timed out
)

var dropReasons = []string{dropProtocol, dropIdle, dropNoAuth, dropWrite, dropAuthLimited, dropUnread, dropTLS}

// metrics counts commands by name and outcome, and the connections the server ended
// or refused. The counters are looked up once, in newMetrics, so counting a command is
// an array index and an atomic add.
type metrics struct {
	byCommand [][outcomes]prometheus.Counter // by command.id
	unknown   [outcomes]prometheus.Counter   // commands the server does not know
	dropped   map[string]prometheus.Counter  // by reason (dropReasons)
	batchTook prometheus.Histogram           // leapcount_resp_batch_duration_seconds
	opErrs    *opmetrics.Errors              // leapcount_op_errors_total{frontend="resp"}
}

// newMetrics registers the metrics on reg (nil: nowhere); refused counts the
// connections refused for being over MaxClients.
func newMetrics(reg prometheus.Registerer, refused func() float64) (*metrics, error) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "leapcount",
		Subsystem: "resp",
		Name:      "commands_total",
		Help:      "RESP commands answered, by command and outcome (ok, bad_request, failed; unknown: sent to the owner, no answer came back).",
	}, []string{"command", "outcome"})
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "leapcount",
		Subsystem: "resp",
		Name:      "connections_dropped_total",
		Help:      "RESP connections the server closed, by reason (protocol, idle, unauthenticated, write_timeout, auth_limited, unread_replies, tls_handshake).",
	}, []string{"reason"})
	refusedFunc := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "leapcount",
		Subsystem: "resp",
		Name:      "connections_refused_total",
		Help:      "RESP connections refused for being over --max-clients.",
	}, refused)
	batchTook := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "leapcount",
		Subsystem: "resp",
		Name:      "batch_duration_seconds",
		Help:      "Time from a batch of counter commands being read to their replies being ready: the commands of a pipeline read together are decided as one batch and answered in one write, so this is each one's latency (one observation a batch).",
		Buckets:   []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	})
	if reg != nil {
		for i, c := range []prometheus.Collector{vec, dropped, refusedFunc, batchTook} {
			if err := reg.Register(c); err != nil {
				for _, done := range []prometheus.Collector{vec, dropped, refusedFunc}[:i] {
					reg.Unregister(done) // all or nothing, so a retry can succeed
				}
				return nil, err
			}
		}
	}
	m := &metrics{byCommand: make([][outcomes]prometheus.Counter, len(commandList)), dropped: map[string]prometheus.Counter{}, batchTook: batchTook}
	for _, cmd := range commandList {
		m.byCommand[cmd.id] = countersFor(vec, cmd.name)
	}
	m.unknown = countersFor(vec, "unknown")
	for _, r := range dropReasons {
		m.dropped[r] = dropped.WithLabelValues(r)
	}
	return m, nil
}

func countersFor(vec *prometheus.CounterVec, name string) (cs [outcomes]prometheus.Counter) {
	for o := range cs {
		cs[o] = vec.WithLabelValues(name, outcomeNames[o])
	}
	return cs
}

// count counts one answer to cmd (nil: an unknown command) that ended in err.
func (m *metrics) count(cmd *command, err error) {
	o := outcomeOK
	switch {
	case err == nil:
	case counter.IsBadInput(err):
		o = outcomeBadRequest
	case errors.Is(err, counter.ErrOutcomeUnknown):
		o = outcomeUnknown
		m.opErrs.Note(err)
	default:
		o = outcomeFailed
		m.opErrs.Note(err)
	}
	if cmd == nil {
		m.unknown[o].Inc()
		return
	}
	m.byCommand[cmd.id][o].Inc()
}
