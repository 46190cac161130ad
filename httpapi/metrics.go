package httpapi

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics counts requests by route and status code and times them by route. The
// route label takes only the fixed route names (and "unknown"), never the raw path,
// so a scan of random paths cannot blow up the number of series.
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "leapcount",
			Subsystem: "http",
			Name:      "requests_total",
			Help:      "HTTP requests answered, by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "leapcount",
			Subsystem: "http",
			Name:      "request_duration_seconds",
			Help:      "Time to answer an HTTP request, by route.",
			// Counter operations take microseconds; the default buckets start at 5ms.
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route"}),
	}
	if reg == nil {
		return m, nil
	}
	if err := reg.Register(m.requests); err != nil {
		return nil, err
	}
	if err := reg.Register(m.latency); err != nil {
		reg.Unregister(m.requests) // all or nothing, so a retry can succeed
		return nil, err
	}
	return m, nil
}

// instrument wraps h so that its requests are counted and timed under route.
func (m *metrics) instrument(route string, h http.Handler) http.Handler {
	labels := prometheus.Labels{"route": route}
	return promhttp.InstrumentHandlerDuration(m.latency.MustCurryWith(labels),
		promhttp.InstrumentHandlerCounter(m.requests.MustCurryWith(labels), h))
}
