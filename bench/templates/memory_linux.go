package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/bench/measure"
	"github.com/warden-sandbox/warden/bench/wardenserve"
)

// memoryPart creates o.sessions idle sessions on host and then on each
// template, each set on a fresh `warden serve` of the same state
// directory, starts each one's Python interpreter (an exec of `1+1`), and reports
// what each session adds to the PSS of the server
// and everything under it (PSS shares a page among its users, so a
// template's files shared through one page cache cost each session only
// its share, as the host's do).
func memoryPart(b *strings.Builder, o options, state string) error {
	started := "Each session's Python interpreter started (an exec of `1+1`), then idle"
	if !o.interp {
		started = "No interpreter started (--interp=false): each session's init only"
	}
	fmt.Fprintf(b, "## Memory: %d idle sessions (native)\n\n%s; PSS of `warden serve` and every process under it, after less before, per session; target: a template no more than host.\n\n", o.sessions, started)
	fmt.Fprintln(b, "| root | sessions | MiB per session | ratio to host | errors |\n|---|---|---|---|---|")
	var host float64
	for _, t := range append([]string{""}, o.templates...) {
		per, n, errs, err := idleSessions(o, state, t)
		name := t
		if name == "" {
			name, host = "host", per
		}
		if err != nil {
			fmt.Fprintf(b, "| %s | | skipped: %s | | |\n", name, strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		fmt.Fprintf(b, "| %s | %d | %.2f | %s | %d |\n", name, n, per, ratio(per, host), errs)
	}
	fmt.Fprintln(b)
	return nil
}

// settle is how long sessions idle before their memory is read.
const settle = 2 * time.Second

// idleSessions starts a server on state, creates o.sessions sessions on
// template t ("" for host) and returns the MiB each added.
func idleSessions(o options, state, t string) (per float64, n, errs int, err error) {
	srv, err := wardenserve.Start(wardenserve.Options{Warden: o.serveWarden, StateDir: state,
		Args: []string{"--max-sessions", "1024", "--max-memory-per-key", "0", "--start-rate", "0", "--exec-pace", "0"}})
	if err != nil {
		return 0, 0, 0, err
	}
	defer srv.Stop()
	c := srv.Client("", 2*time.Minute)
	opts := map[string]any{}
	if t != "" {
		opts["template"] = t
	}
	time.Sleep(settle)
	before := measure.Footprint(srv.Cmd.Process.Pid, false)
	var ids []string
	for i := 0; i < o.sessions; i++ {
		id, err := c.Create(opts)
		if err != nil {
			if errs++; len(ids) == 0 {
				return 0, 0, errs, fmt.Errorf("creating a session on %q: %w", t, err)
			}
			continue
		}
		ids = append(ids, id)
		if !o.interp {
			continue
		}
		if err := c.Python(id, "1+1"); err != nil {
			if errs++; len(ids) == 1 {
				c.Remove(id)
				return 0, 0, errs, fmt.Errorf("python in a session on %q: %w", t, err)
			}
		}
	}
	time.Sleep(settle)
	after := measure.Footprint(srv.Cmd.Process.Pid, false)
	for _, id := range ids {
		c.Remove(id)
	}
	return float64(after-before) / float64(len(ids)) / (1 << 20), len(ids), errs, nil
}
