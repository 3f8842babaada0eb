package server

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Registry is where the server registers its metrics and what /metrics
// exposes. A *prometheus.Registry is both; the default is a fresh one, so
// two servers in one process (tests) never collide on the global registry.
type Registry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// metrics are the server's Prometheus series. Label values come from
// small fixed sets, never from user input, so cardinality stays bounded.
type metrics struct {
	execs    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	kills    *prometheus.CounterVec
	refused  *prometheus.CounterVec
}

// allStates are reported even at zero, so a dashboard's series never
// vanish when no session is in a state.
var allStates = []sandbox.State{
	sandbox.StateCreating, sandbox.StateReady, sandbox.StateBusy,
	sandbox.StateStopping, sandbox.StateGone,
}

// sessionsCollector reads the Manager's counts at scrape time, so the
// gauge is never stale and the Manager needs no hook into the server.
type sessionsCollector struct {
	s    Sessions
	desc *prometheus.Desc
}

func (c *sessionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *sessionsCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.s.Counts()
	for _, st := range allStates {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}

func newMetrics(reg prometheus.Registerer, s Sessions) (*metrics, error) {
	m := &metrics{
		execs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warden_execs_total",
			Help: "Execs and one-shot runs by kind (command, python, bash, javascript, run) and outcome.",
		}, []string{"kind", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "warden_exec_duration_seconds",
			Help: "Wall time of execs and one-shot runs, as the server saw them.",
			// 1 ms up to 60 s, about three buckets per decade.
			Buckets: prometheus.ExponentialBucketsRange(0.001, 60, 16),
		}, []string{"kind"}),
		kills: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warden_kills_total",
			Help: "Sandboxes or execs Warden killed, by reason (timeout, oom, ttl, idle).",
		}, []string{"reason"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warden_denied_requests_total",
			Help: "Requests refused, by reason (unauthorized, invalid, too_large, too_many_sessions, not_found).",
		}, []string{"reason"}),
	}
	cs := []prometheus.Collector{
		m.execs, m.duration, m.kills, m.refused,
		&sessionsCollector{s: s, desc: prometheus.NewDesc("warden_sessions",
			"Sessions by state, read from the session manager at scrape time.", []string{"state"}, nil)},
		collectors.NewGoCollector(),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// deniedReasons names the refusals worth watching: auth probing, bad
// clients, oversized payloads, capacity and id guessing.
var deniedReasons = map[int]string{
	http.StatusUnauthorized:          "unauthorized",
	http.StatusBadRequest:            "invalid",
	http.StatusRequestEntityTooLarge: "too_large",
	http.StatusTooManyRequests:       "too_many_sessions",
	http.StatusNotFound:              "not_found",
}

func (m *metrics) denied(status int) {
	if reason, ok := deniedReasons[status]; ok {
		m.refused.WithLabelValues(reason).Inc()
	}
}

// exec records one exec or run: its outcome, its duration and, when
// Warden killed it, why.
func (m *metrics) exec(kind string, res spec.Result, err error, took time.Duration) {
	outcome := "ok"
	switch {
	case err != nil || res.Error != "":
		outcome = "error"
	case res.TimedOut:
		outcome = "timeout"
		m.kills.WithLabelValues("timeout").Inc()
	case res.OOMKilled:
		outcome = "oom"
		m.kills.WithLabelValues("oom").Inc()
	case res.ExitCode != 0 || res.Exception != nil:
		outcome = "failed"
	}
	m.execs.WithLabelValues(kind, outcome).Inc()
	m.duration.WithLabelValues(kind).Observe(took.Seconds())
}

// ObserveReap counts a session the Manager's reaper ended, with reason
// "ttl" or "idle", in warden_kills_total. The Manager calls it because
// only it sees those kills; timeouts and OOM kills the server counts
// itself from the Results it hands out. Any other reason is counted as
// "other", so a caller cannot grow the label set without bound.
func (s *Server) ObserveReap(reason string) {
	if reason != "ttl" && reason != "idle" {
		reason = "other"
	}
	s.metrics.kills.WithLabelValues(reason).Inc()
}
