package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	wardenmcp "github.com/warden-sandbox/warden/internal/mcp"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// mcpOwner owns every session of a `warden mcp` process: its one client.
const mcpOwner = "mcp"

// mcpOptions are warden mcp's flags.
type mcpOptions struct {
	backend      string
	backendOpts  sandbox.BackendOptions
	limits       spec.Limits
	ceilings     spec.Ceilings
	maxSessions  int
	ttl, idle    time.Duration
	caps         sessionCaps
	allowNetwork bool
	verbose      bool
	execPace     float64
}

func newMCPCmd() *cobra.Command {
	o := &mcpOptions{limits: spec.DefaultLimits, ceilings: sandbox.DefaultCeilings()}
	o.limits.Timeout = 30 * time.Second
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve sandboxes to an AI agent over the Model Context Protocol (stdio)",
		Long: `Serve Warden's tools (run_code, run_command, create_session, close_session,
write_file, read_file, list_files) to one MCP client over stdin and stdout.
Sandboxes run in this process; the client starts it as a command, e.g.
  claude mcp add warden -- warden mcp
Sessions the client creates are deleted when it disconnects. Logs go to
stderr. Sandboxes have no network unless --allow-network lets a session ask
for an allowlist. The same tools are served over HTTP at /mcp by warden serve.
The limits (--memory, --timeout, ...) must fit the ceilings (--max-*, defaults
sized for this host), which also bound what a call may ask for.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	f := cmd.Flags()
	f.StringVar(&o.backend, "backend", "native", "isolation backend of every sandbox: native, gvisor or docker")
	addBackendFlags(f, &o.backendOpts)
	l := &o.limits
	f.Var(durationFlag{&l.Timeout}, "timeout", "default time limit of each tool call")
	f.Var(sizeFlag{&l.MemoryBytes}, "memory", "memory limit of each sandbox, tmpfs included (0: none)")
	f.Var(cpusFlag{&l.CPUs}, "cpus", "CPU bandwidth of each sandbox in cores (0: none)")
	f.Int64Var(&l.Pids, "pids", l.Pids, "processes and threads of each sandbox (0: none)")
	f.Var(sizeFlag{&l.DiskBytes}, "disk", "writable disk of each sandbox: /workspace, /tmp and home")
	f.IntVar(&o.maxSessions, "max-sessions", 8, "sessions and one-off runs alive at once")
	f.DurationVar(&o.ttl, "ttl", time.Hour, "default session lifetime")
	f.DurationVar(&o.idle, "idle-timeout", 10*time.Minute, "default time an unused session lives")
	addSessionCapFlags(f, &o.caps)
	addCeilingFlags(f, &o.ceilings)
	addExecPaceFlag(f, &o.execPace)
	f.BoolVar(&o.allowNetwork, "allow-network", false, "let create_session give a sandbox egress to an allowlist of hosts")
	f.BoolVar(&o.verbose, "verbose", false, "log MCP sessions connecting and ending, not just warnings, to stderr")
	return cmd
}

// run serves one client on stdio until it disconnects or a signal comes.
func (o *mcpOptions) run(ctx context.Context) error {
	if err := o.limits.Validate(); err != nil {
		return err
	}
	if o.limits.Timeout <= 0 {
		return errors.New("--timeout must be positive: a call without a time limit could hold its sandbox forever")
	}
	if t := o.ceilings.Timeout; t != 0 && t < time.Second {
		return fmt.Errorf("--max-timeout %s is too short: calls ask for whole seconds, so use at least 1s", t)
	}
	pace, err := execPace(o.execPace)
	if err != nil {
		return err
	}
	// The pool's spec is what the tools build, so Validate checks the
	// limit flags against the ceilings.
	cfg := sandbox.Config{
		MaxSessions: o.maxSessions, DefaultTTL: o.ttl, DefaultIdle: o.idle, MaxTTL: o.caps.ttl, MaxIdle: o.caps.idle, Ceilings: o.ceilings,
		ExecPace: pace,
		PoolSpec: spec.Spec{Limits: o.limits, Network: spec.NetworkPolicy{Mode: spec.NetNone}},
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	o.backendOpts.Server = true
	backend, err := sandbox.NewBackend(o.backend, o.backendOpts)
	if err != nil {
		return err
	}
	cfg.OnCleanupError = func(err error) { log.Error("cleaning up a sandbox", "err", err) }
	mgr := sandbox.NewManager(backend, cfg)
	defer mgr.Close()
	err = wardenmcp.ServeStdio(ctx, mgr, wardenmcp.Options{
		Owner: mcpOwner, Limits: o.limits, MaxTimeout: mcpMaxTimeout(o.ceilings), AllowNetwork: o.allowNetwork, Version: version, Logger: log,
	})
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return nil // a signal is the ordinary way to stop
	}
	return err
}
