package main

import (
	"errors"
	"fmt"
	"log"
	"net/http"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/bench/wardenserve"
)

// StartRow is what key B's client, starting sandboxes back to back for a
// while, cost the host: a start (a one-shot run, or a session's create
// and delete) costs warden serve and its spawner far more than an exec.
type StartRow struct {
	What string `json:"what"`
	// Polite says the client waits as Retry-After says after a 429; a
	// hostile one asks again at once.
	Polite  bool    `json:"polite"`
	Seconds float64 `json:"seconds"`
	Started int     `json:"started"`
	// Refused were answered 429 (start pacing, or the key's share).
	Refused int     `json:"refused"`
	Failed  int     `json:"failed"`
	HostS   float64 `json:"host_s"`
	// MSPerStart is HostS over Started, in ms; HostCores is HostS over
	// Seconds, the share of a core the loop kept busy outside cgroups.
	MSPerStart float64 `json:"ms_per_start"`
	HostCores  float64 `json:"host_cores"`
	LastError  string  `json:"last_error,omitempty"`
}

// starts are the start loops: each returns the status of one start.
var starts = []struct {
	what  string
	start func(t *tenants) error
}{
	{"one-shot run of `true` (POST /v1/run)", func(t *tenants) error {
		return t.b.Post("/v1/run", map[string]any{"command": []string{"true"}}, nil)
	}},
	{"session create + delete", func(t *tenants) error {
		id, err := t.b.Create(nil)
		if err == nil {
			t.b.Remove(id)
		}
		return err
	}},
}

// startCosts runs each start loop for o.startSecs, as a polite client
// and as a hostile one, each from a full burst (the key's bucket is
// refilled in between), and takes the host CPU of warden serve and its
// spawner outside the sandboxes' cgroups.
func startCosts(o options, t *tenants) []StartRow {
	var rows []StartRow
	for _, s := range starts {
		for _, polite := range []bool{true, false} {
			time.Sleep(o.startRefill)
			log.Printf("starts: %s, back to back (polite %v)", s.what, polite)
			rows = append(rows, startLoop(o, t, s.what, s.start, polite))
		}
	}
	return rows
}

// startLoop starts sandboxes with start for o.startSecs.
func startLoop(o options, t *tenants, what string, start func(*tenants) error, polite bool) StartRow {
	row := StartRow{What: what, Polite: polite}
	pid := t.srv.Cmd.Process.Pid
	before := hostCPU(pid)
	begin := time.Now()
	for time.Since(begin).Seconds() < o.startSecs {
		err := start(t)
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
	row.HostS = spent(before, hostCPU(pid))
	row.HostCores = row.HostS / row.Seconds
	if row.Started > 0 {
		row.MSPerStart = 1000 * row.HostS / float64(row.Started)
	}
	return row
}

func (r *Report) startsMD(b *strings.Builder) {
	if len(r.Starts) == 0 {
		return
	}
	b.WriteString("\n## Starts back to back\n\nOne client of key B starting sandboxes as fast as it can, one at a time, from a full burst; " +
		"a polite client waits as a 429's Retry-After says, a hostile one asks again at once. " +
		"Host = CPU of warden serve and its spawner outside the sandboxes' cgroups; per start = host over started (refusals included).\n\n")
	b.WriteString("| start | client | seconds | started | refused | failed | host s | host ms per start | host cores | last error |\n" +
		"|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, row := range r.Starts {
		client := "hostile"
		if row.Polite {
			client = "polite"
		}
		fmt.Fprintf(b, "| %s | %s | %.1f | %d | %d | %d | %.3f | %.1f | %.3f | %s |\n", row.What, client, row.Seconds, row.Started, row.Refused,
			row.Failed, row.HostS, row.MSPerStart, row.HostCores, cell(row.LastError))
	}
}
