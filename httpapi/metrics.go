package httpapi

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// instrument wraps h so that its requests are counted and timed under route. It does
// what promhttp's InstrumentHandlerCounter and InstrumentHandlerDuration do, with the
// route's children looked up once instead of per request: their label lookups and
// wrappers were a large share of the handler's CPU (BenchmarkHandler).
func (m *metrics) instrument(route string, h http.Handler) http.Handler {
	latency := m.latency.WithLabelValues(route)
	codes := &codeCounters{vec: m.requests, route: route}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		codes.get(sw.status()).Inc()
		latency.Observe(time.Since(start).Seconds())
	})
}

// codeCounters are one route's request counters by status code, made on first use.
type codeCounters struct {
	vec   *prometheus.CounterVec
	route string
	by    [500]atomic.Pointer[prometheus.Counter] // codes 100 to 599
}

func (c *codeCounters) get(code int) prometheus.Counter {
	if code < 100 || code > 599 {
		return c.vec.WithLabelValues(c.route, strconv.Itoa(code))
	}
	slot := &c.by[code-100]
	if p := slot.Load(); p != nil {
		return *p
	}
	ctr := c.vec.WithLabelValues(c.route, strconv.Itoa(code)) // the same child if two race here
	slot.Store(&ctr)
	return ctr
}

// statusWriter remembers the status code a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK // nothing written: net/http answers 200
	}
	return w.code
}
