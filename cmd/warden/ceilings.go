//go:build !slim

package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// addCeilingFlags adds a flag per spec.CeilingFields entry (--max-memory,
// --max-pids, ...) setting c, whose values are the defaults shown.
func addCeilingFlags(f *pflag.FlagSet, c *spec.Ceilings) {
	l := (*spec.Limits)(c)
	for _, cf := range spec.CeilingFields {
		usage := cf.Usage + " (0: no ceiling)"
		switch p := cf.Field(l).(type) {
		case *int64:
			if cf.Size {
				f.Var(sizeFlag{p}, cf.Flag, usage)
			} else {
				f.Int64Var(p, cf.Flag, *p, usage)
			}
		case *float64:
			f.Var(cpusFlag{p}, cf.Flag, usage)
		case *time.Duration:
			f.Var(durationFlag{p}, cf.Flag, usage)
		default:
			panic(fmt.Sprintf("ceiling %s has a field of type %T", cf.Name, p))
		}
	}
}

// sessionFlags are the flags every serving command (serve, mcp) shares
// about its sessions' lives and limits, so both spell them one way.
type sessionFlags struct {
	ttl, idle time.Duration
	caps      sessionCaps
	ceilings  spec.Ceilings
	paces     paces
}

// addSessionFlags adds --ttl, --idle-timeout, their caps, the ceilings
// (defaulting to sandbox.DefaultCeilings) and the paces, setting s.
func addSessionFlags(f *pflag.FlagSet, s *sessionFlags) {
	s.ceilings = sandbox.DefaultCeilings()
	f.DurationVar(&s.ttl, "ttl", time.Hour, "default session lifetime")
	f.DurationVar(&s.idle, "idle-timeout", 10*time.Minute, "default time an unused session lives")
	addSessionCapFlags(f, &s.caps)
	addCeilingFlags(f, &s.ceilings)
	addPaceFlags(f, &s.paces)
}

// sessionCaps are the longest ttl and idle timeout a session may ask for.
type sessionCaps struct{ ttl, idle time.Duration }

func addSessionCapFlags(f *pflag.FlagSet, c *sessionCaps) {
	c.ttl, c.idle = sandbox.DefaultMaxTTL, sandbox.DefaultMaxIdle
	f.DurationVar(&c.ttl, "max-ttl", c.ttl, "longest lifetime a session may ask for (0: the API's own maximum, 24h)")
	f.DurationVar(&c.idle, "max-idle-timeout", c.idle, "longest idle timeout a session may ask for (0: the API's own maximum, 24h)")
}

// serverBackend builds the backend a serving command (serve, mcp) runs
// every sandbox on, logging to log, and checks that cfg fits it. The
// notes say what Fit lowered, for logFit once the caller may log.
func serverBackend(name string, opts sandbox.BackendOptions, cfg sandbox.Config, log *slog.Logger) (sandbox.Backend, []string, error) {
	opts.Server = true
	opts.Logger = log
	backend, err := sandbox.NewBackend(name, opts)
	if err != nil {
		return nil, nil, err
	}
	_, notes, err := cfg.Fit(backend)
	if err != nil {
		return nil, nil, err
	}
	return backend, notes, nil
}

// logFit logs what Config.Fit lowered, so the operator sees every limit
// that is not what the flags said, and why.
func logFit(log *slog.Logger, notes []string) {
	for _, n := range notes {
		log.Warn(n)
	}
}
