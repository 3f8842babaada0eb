package server

import (
	"net/http"
	"time"

	"github.com/warden-sandbox/warden/internal/metrics"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// serverMetrics are the server's Prometheus series. Label values come
// from small fixed sets, never from user input, so cardinality stays
// bounded.
type serverMetrics struct {
	execs    *metrics.CounterVec
	duration *metrics.HistogramVec
	kills    *metrics.CounterVec
	refused  *metrics.CounterVec
	paced    *metrics.CounterVec
}

// allStates are reported even at zero, so a dashboard's series never
// vanish when no session is in a state.
var allStates = []sandbox.State{
	sandbox.StateCreating, sandbox.StateReady, sandbox.StateBusy,
	sandbox.StateStopping, sandbox.StateGone, sandbox.StateDead,
}

// newMetrics registers the server's series, the process figures and a
// sessions gauge that reads s's counts at scrape time, so the gauge is
// never stale and the Manager needs no hook into the server.
func newMetrics(reg *metrics.Registry, s Sessions) (*serverMetrics, error) {
	m := &serverMetrics{
		execs: metrics.NewCounterVec("warden_execs_total",
			"Execs and one-shot runs by kind (command, python, bash, javascript, run) and outcome.",
			"kind", "outcome"),
		duration: metrics.NewHistogramVec("warden_exec_duration_seconds",
			"Wall time of execs and one-shot runs, as the server saw them.",
			// 1 ms up to 60 s, three round bounds per decade.
			[]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}, "kind"),
		kills: metrics.NewCounterVec("warden_kills_total",
			"Sandboxes or execs Warden killed, by reason (timeout, oom, ttl, idle).",
			"reason"),
		refused: metrics.NewCounterVec("warden_denied_requests_total",
			"Requests refused, by reason (unauthorized, invalid, too_large, too_many_sessions, not_found).",
			"reason"),
		paced: metrics.NewCounterVec("warden_exec_paced_seconds_total",
			"Time session execs waited for their turn under exec pacing (--exec-pace), by kind: how much the pacing slows clients.",
			"kind"),
	}
	sessions := metrics.NewGaugeFunc("warden_sessions",
		"Sessions by state, read from the session manager at scrape time.", []string{"state"},
		func() []metrics.Sample {
			counts := s.Counts()
			samples := make([]metrics.Sample, len(allStates))
			for i, st := range allStates {
				samples[i] = metrics.Sample{LabelValues: []string{string(st)}, Value: float64(counts[st])}
			}
			return samples
		})
	cs := append([]metrics.Collector{m.execs, m.duration, m.kills, m.refused, m.paced, sessions}, metrics.ProcessMetrics()...)
	if err := reg.Register(cs...); err != nil {
		return nil, err
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

func (m *serverMetrics) denied(status int) {
	if reason, ok := deniedReasons[status]; ok {
		m.refused.With(reason).Inc()
	}
}

// exec records one exec or run: its outcome, its duration and, when
// Warden killed it, why.
func (m *serverMetrics) exec(kind string, res spec.Result, err error, took time.Duration) {
	outcome := "ok"
	switch {
	case err != nil || res.Error != "":
		outcome = "error"
	case res.TimedOut:
		outcome = "timeout"
		m.kills.With("timeout").Inc()
	case res.OOMKilled:
		outcome = "oom"
		m.kills.With("oom").Inc()
	case res.ExitCode != 0 || res.Exception != nil:
		outcome = "failed"
	}
	m.execs.With(kind, outcome).Inc()
	m.duration.With(kind).Observe(took.Seconds())
	if res.QueuedMS > 0 {
		m.paced.With(kind).Add(res.QueuedMS / 1000)
	}
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
	s.metrics.kills.With(reason).Inc()
}
