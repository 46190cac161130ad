package respapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leapcount/leapcount/counter"
)

// Outcomes of a command, as the metrics label them.
const (
	outcomeOK         = iota // answered
	outcomeBadRequest        // the client's mistake: bad input, unknown command, no auth
	outcomeFailed            // the service's: the counter was unavailable, the node stopping
	outcomes
)

var outcomeNames = [outcomes]string{"ok", "bad_request", "failed"}

// metrics counts commands by name and outcome. The counters are looked up once, in
// newMetrics, so counting a command is an array index and an atomic add.
type metrics struct {
	byCommand [][outcomes]prometheus.Counter // by command.id
	unknown   [outcomes]prometheus.Counter   // commands the server does not know
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "leapcount",
		Subsystem: "resp",
		Name:      "commands_total",
		Help:      "RESP commands answered, by command and outcome (ok, bad_request, failed).",
	}, []string{"command", "outcome"})
	if reg != nil {
		if err := reg.Register(vec); err != nil {
			return nil, err
		}
	}
	m := &metrics{byCommand: make([][outcomes]prometheus.Counter, len(commandList))}
	for _, cmd := range commandList {
		m.byCommand[cmd.id] = countersFor(vec, cmd.name)
	}
	m.unknown = countersFor(vec, "unknown")
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
	default:
		o = outcomeFailed
	}
	if cmd == nil {
		m.unknown[o].Inc()
		return
	}
	m.byCommand[cmd.id][o].Inc()
}
