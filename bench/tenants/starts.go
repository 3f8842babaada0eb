package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/bench/measure"
	"github.com/warden-sandbox/warden/bench/wardenserve"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// StartRow is what key B's client, starting sandboxes back to back for a
// while, cost the host: a start (a one-shot run, or a session's create
// and delete) costs warden serve and its spawner far more than an exec.
// A row is the run of median HostCores among Repeats.
type StartRow struct {
	What string `json:"what"`
	// Pacing is the server's --start-rate ("off" for 0).
	Pacing string `json:"pacing"`
	// Polite says the client waits as Retry-After says after a 429; a
	// hostile one asks again at once.
	Polite  bool    `json:"polite"`
	Repeats int     `json:"repeats"`
	Seconds float64 `json:"seconds"`
	Started int     `json:"started"`
	// Refused were answered 429 (start pacing, or the key's share).
	Refused int `json:"refused"`
	Failed  int `json:"failed"`
	// LiveS is the CPU of the server's and spawner's threads in their
	// own cgroup; ReapedS what their reaped children (the inits) used,
	// in the sandboxes' cgroups and out of them; SandboxS what the
	// sandboxes' cgroups used (-1: unknown). HostS is LiveS plus ReapedS
	// less SandboxS: the inits' threads outside the cgroups count.
	LiveS    float64 `json:"live_s"`
	ReapedS  float64 `json:"reaped_s"`
	SandboxS float64 `json:"sandbox_s"`
	HostS    float64 `json:"host_s"`
	// MSPerStart is HostS over Started, in ms; HostCores is HostS over
	// Seconds, the share of a core the loop kept busy outside cgroups.
	MSPerStart float64 `json:"ms_per_start"`
	HostCores  float64 `json:"host_cores"`
	LastError  string  `json:"last_error,omitempty"`
}

// starts are the start loops: each returns the status of one start.
var starts = []struct {
	what  string
	start func(c *wardenserve.Client) error
}{
	{"one-shot run of `true` (POST /v1/run)", func(c *wardenserve.Client) error {
		return c.Post("/v1/run", map[string]any{"command": []string{"true"}}, nil)
	}},
	{"session create + delete", func(c *wardenserve.Client) error {
		id, err := c.Create(nil)
		if err == nil {
			c.Remove(id)
		}
		return err
	}},
}

// startServer is one of the two servers of the starts part: pacing off,
// and the server's pacing (its default, or --start-rate as given).
type startServer struct {
	pacing string
	t      *tenants
	acct   *measure.AcctGroup
}

// startCosts measures each start loop, o.startRepeats times, on a server
// with start pacing off and one with it on (politely and not), the loops
// interleaved so drifting load hits all alike. Each runs in a cpuacct
// cgroup of its own, so its sandboxes' CPU can be told from the host's.
func startCosts(o options, slog io.Writer) ([]StartRow, error) {
	off, err := newStartServer(o, slog, "off", "--start-rate=0")
	if err != nil {
		return nil, err
	}
	defer off.stop()
	on, err := newStartServer(o, slog, pacingOf(o.serveArgs))
	if err != nil {
		return nil, err
	}
	defer on.stop()
	runs := map[string][]StartRow{}
	var order []string
	var lastPaced time.Time
	for rep := range o.startRepeats {
		for _, s := range starts {
			for _, step := range []struct {
				srv    *startServer
				polite bool
			}{{on, true}, {off, true}, {on, false}} {
				if step.srv == on {
					time.Sleep(time.Until(lastPaced.Add(o.startRefill))) // the key's burst back
				}
				log.Printf("starts %d/%d: %s, pacing %s, polite %v", rep+1, o.startRepeats, s.what, step.srv.pacing, step.polite)
				row := startLoop(o, step.srv, s.what, s.start, step.polite)
				if step.srv == on {
					lastPaced = time.Now()
				}
				k := fmt.Sprint(row.What, row.Pacing, row.Polite)
				if runs[k] == nil {
					order = append(order, k)
				}
				runs[k] = append(runs[k], row)
			}
		}
	}
	var rows []StartRow
	for _, k := range order {
		rows = append(rows, medianStart(runs[k]))
	}
	return rows, nil
}

// pacingOf is the --start-rate among the server's flags, or the default.
func pacingOf(args []string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--start-rate="); ok {
			return v
		}
	}
	return fmt.Sprint(sandbox.DefaultStartRate)
}

// newStartServer starts warden serve with extra flags in a cpuacct
// cgroup of its own (without one, sandboxes' CPU is unknown).
func newStartServer(o options, slog io.Writer, pacing string, extra ...string) (*startServer, error) {
	s := &startServer{pacing: pacing}
	acct, err := measure.NewAcctGroup(fmt.Sprintf("bench-tenants-%d-%s", time.Now().UnixNano(), pacing))
	if err != nil {
		log.Printf("starts: sandboxes' CPU will be unknown: %v", err)
	}
	s.acct = acct
	o.serveArgs = append(append([]string(nil), o.serveArgs...), extra...)
	start := func() error {
		var err error
		s.t, err = startTenants(o, slog)
		return err
	}
	if acct != nil {
		err = acct.Enter(start)
	} else {
		err = start()
	}
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("starting warden serve, pacing %s: %w", pacing, err)
	}
	return s, nil
}

// stop stops the server and removes its cgroup.
func (s *startServer) stop() {
	if s.t != nil {
		s.t.srv.Stop()
	}
	if s.acct != nil {
		s.acct.Remove()
	}
}

// sandboxCPU is the CPU the server's sandboxes have used, or -1.
func (s *startServer) sandboxCPU() float64 {
	if s.acct == nil {
		return -1
	}
	return s.acct.Sandboxes()
}

// startLoop starts sandboxes with start for o.startSecs.
func startLoop(o options, s *startServer, what string, start func(*wardenserve.Client) error, polite bool) StartRow {
	row := StartRow{What: what, Pacing: s.pacing, Polite: polite}
	pid := s.t.srv.Cmd.Process.Pid
	live, reaped, box := hostCPU(pid), reapedCPU(pid), s.sandboxCPU()
	begin := time.Now()
	for time.Since(begin).Seconds() < o.startSecs {
		err := start(s.t.b)
		var ae *wardenserve.APIError
		switch {
		case err == nil:
			row.Started++
		case errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests:
			row.Refused++
			row.LastError = err.Error()
			if polite {
				time.Sleep(time.Duration(max(ae.RetryAfter, 1)) * time.Second)
			}
		default:
			row.Failed++
			row.LastError = err.Error()
			time.Sleep(10 * time.Millisecond)
		}
	}
	row.Seconds = time.Since(begin).Seconds()
	row.LiveS, row.ReapedS = spent(live, hostCPU(pid)), spent(reaped, reapedCPU(pid))
	row.SandboxS = -1
	if box >= 0 {
		row.SandboxS = s.sandboxCPU() - box
	}
	row.HostS = row.LiveS + max(row.ReapedS-max(row.SandboxS, 0), 0)
	row.HostCores = row.HostS / row.Seconds
	if row.Started > 0 {
		row.MSPerStart = 1000 * row.HostS / float64(row.Started)
	}
	return row
}

// medianStart is the run of median host cores (the upper one of an even
// count), with the count of runs.
func medianStart(runs []StartRow) StartRow {
	var cores []float64
	for _, r := range runs {
		cores = append(cores, r.HostCores)
	}
	m := measure.Pct(cores, 50)
	row := runs[0]
	for _, r := range runs {
		if r.HostCores == m {
			row = r
		}
	}
	row.Repeats = len(runs)
	return row
}

func (r *Report) startsMD(b *strings.Builder) {
	if len(r.Starts) == 0 {
		return
	}
	b.WriteString("\n## Starts back to back\n\nOne client of key B starting sandboxes as fast as it can, one at a time, from a full burst, " +
		"on a server with start pacing off and one with it on (the loops interleaved, each row the run of median host cores); " +
		"a polite client waits as a 429's Retry-After says, a hostile one asks again at once. " +
		"Host = CPU of warden serve's and its spawner's threads outside the sandboxes' cgroups (live), plus what the inits they reaped " +
		"used (reaped) less what the sandboxes' cgroups used (sandbox): the inits' threads outside their cgroups; " +
		"per start = host over started (refusals included).\n\n")
	b.WriteString("| start | pacing | client | runs | seconds | started | refused | failed | live s | reaped s | sandbox s | host s | host ms per start | host cores | last error |\n" +
		"|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, row := range r.Starts {
		client := "hostile"
		switch {
		case row.Pacing == "off":
			client = "any (no 429)"
		case row.Polite:
			client = "polite"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %d | %.1f | %d | %d | %d | %.3f | %.3f | %.3f | %.3f | %.1f | %.3f | %s |\n", row.What, row.Pacing, client,
			row.Repeats, row.Seconds, row.Started, row.Refused, row.Failed, row.LiveS, row.ReapedS, row.SandboxS, row.HostS, row.MSPerStart, row.HostCores, cell(row.LastError))
	}
}
