package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/metrics"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// serverMetrics are the server's Prometheus series, kept twice: once for
// the whole server, which only an operator (a metrics key, or anyone when
// the server runs without keys) reads, and once per tenant, which that
// tenant's key reads, so no key learns what other tenants do. Label
// values come from small fixed sets, never from user input, and tenants
// are the configured keys' owners, so cardinality stays bounded.
type serverMetrics struct {
	all *familySet
	// tenants is built in New from the keys and only read after.
	tenants map[string]*familySet
}

// familySet is one view's series and the registry that serves them.
type familySet struct {
	reg      *metrics.Registry
	execs    *metrics.CounterVec
	duration *metrics.HistogramVec
	kills    *metrics.CounterVec
	refused  *metrics.CounterVec
	paced    *metrics.CounterVec
}

// allStates are reported even at zero, so a dashboard's series never
// vanish when no session is in a state.
var allStates = sandbox.States

// newMetrics registers the whole server's series and the process figures
// in reg, and builds each owner's series in a registry of its own. The
// sessions gauges read s's counts at scrape time, so they are never stale
// and the Manager needs no hook into the server.
func newMetrics(reg *metrics.Registry, s sandbox.Sessions, owners []string) (*serverMetrics, error) {
	all, err := newFamilySet(reg, s.Counts, metrics.ProcessMetrics()...)
	if err != nil {
		return nil, err
	}
	m := &serverMetrics{all: all, tenants: make(map[string]*familySet, len(owners))}
	for _, o := range owners {
		if m.tenants[o], err = newFamilySet(metrics.NewRegistry(), func() map[sandbox.State]int { return s.CountsOf(o) }); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// newFamilySet registers one view's series, its sessions gauge reading
// counts, and extra, in reg.
func newFamilySet(reg *metrics.Registry, counts func() map[sandbox.State]int, extra ...metrics.Collector) (*familySet, error) {
	f := &familySet{
		reg: reg,
		execs: metrics.NewCounterVec("warden_execs_total",
			"Execs and one-shot runs by kind (command, "+strings.Join(interp.Languages(), ", ")+", run) and outcome.",
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
			c := counts()
			samples := make([]metrics.Sample, len(allStates))
			for i, st := range allStates {
				samples[i] = metrics.Sample{LabelValues: []string{string(st)}, Value: float64(c[st])}
			}
			return samples
		})
	cs := append([]metrics.Collector{f.execs, f.duration, f.kills, f.refused, f.paced, sessions}, extra...)
	if err := reg.Register(cs...); err != nil {
		return nil, err
	}
	return f, nil
}

// views are the sets a figure of owner's counts in: the whole server's,
// and owner's own when owner is a tenant.
func (m *serverMetrics) views(owner string) []*familySet {
	if t, ok := m.tenants[owner]; ok {
		return []*familySet{m.all, t}
	}
	return []*familySet{m.all}
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

// denied counts a refusal of owner's request ("" before authentication,
// which only the whole server's view counts).
func (m *serverMetrics) denied(owner string, status int) {
	reason, ok := deniedReasons[status]
	if !ok {
		return
	}
	for _, v := range m.views(owner) {
		v.refused.With(reason).Inc()
	}
}

// exec records one exec or run of owner: its outcome, its duration and,
// when Warden killed it, why.
func (m *serverMetrics) exec(owner, kind string, res spec.Result, err error, took time.Duration) {
	outcome, kill := "ok", ""
	switch {
	case err != nil || res.Error != "":
		outcome = "error"
	case res.TimedOut:
		outcome, kill = "timeout", "timeout"
	case res.OOMKilled:
		outcome, kill = "oom", "oom"
	case res.ExitCode != 0 || res.Exception != nil:
		outcome = "failed"
	}
	for _, v := range m.views(owner) {
		if kill != "" {
			v.kills.With(kill).Inc()
		}
		v.execs.With(kind, outcome).Inc()
		v.duration.With(kind).Observe(took.Seconds())
		if res.QueuedMS > 0 {
			v.paced.With(kind).Add(res.QueuedMS / 1000)
		}
	}
}

// ObserveReap counts a session of owner that the Manager's reaper ended,
// with reason "ttl" or "idle", in warden_kills_total. The Manager calls
// it because only it sees those kills; timeouts and OOM kills the server
// counts itself from the Results it hands out. Any other reason is
// counted as "other", so a caller cannot grow the label set without bound.
func (s *Server) ObserveReap(owner, reason string) {
	if reason != "ttl" && reason != "idle" {
		reason = "other"
	}
	for _, v := range s.metrics.views(owner) {
		v.kills.With(reason).Inc()
	}
}
