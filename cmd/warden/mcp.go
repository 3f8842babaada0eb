//go:build !slim

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
	maxSessions  int
	allowNetwork bool
	verbose      bool
	stateDir     string
	sessionFlags
}

func newMCPCmd() *cobra.Command {
	o := &mcpOptions{limits: spec.DefaultLimits}
	o.limits.Timeout = 30 * time.Second
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: mcpShort,
		Long: `Serve Warden's tools (run_code, run_command, create_session, close_session,
write_file, read_file, list_files) to one MCP client over stdin and stdout.
Sandboxes run in this process; the client starts it as a command, e.g.
  claude mcp add warden -- warden mcp
Sessions the client creates are deleted when it disconnects. Logs go to
stderr. Sandboxes have no network unless --allow-network lets a session ask
for an allowlist. The same tools are served over HTTP at /mcp by warden serve.
The limits (--memory, --timeout, ...) must fit the ceilings (--max-*, defaults
sized for this host), which also bound what a call may ask for: a limit flag
given above its ceiling is refused, a default one above it is lowered to it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), cmd.Flags().Changed) },
	}
	f := cmd.Flags()
	addBackendFlags(f, &o.backend, "isolation backend of every sandbox", &o.backendOpts)
	addAgentTransportFlag(f, &o.backendOpts)
	l := &o.limits
	f.Var(durationFlag{&l.Timeout}, "timeout", "default time limit of each tool call")
	f.Var(sizeFlag{&l.MemoryBytes}, "memory", "memory limit of each sandbox, tmpfs included (0: none, only with --max-memory 0)")
	f.Var(cpusFlag{&l.CPUs}, "cpus", "CPU bandwidth of each sandbox in cores (0: none, only with --max-cpus 0)")
	f.Int64Var(&l.Pids, "pids", l.Pids, "processes and threads of each sandbox (0: none, only with --max-pids 0)")
	f.Var(sizeFlag{&l.DiskBytes}, "disk", "writable disk of each sandbox: /workspace, /tmp and home")
	f.IntVar(&o.maxSessions, "max-sessions", 8, "sessions and one-off runs alive at once")
	addSessionFlags(f, &o.sessionFlags)
	f.BoolVar(&o.allowNetwork, "allow-network", false, "let create_session give a sandbox egress to an allowlist of hosts")
	f.StringVar(&o.stateDir, "state-dir", defaultStateDir(), `the state directory whose templates/ holds the templates create_session may name ("none": the host's root only)`)
	f.BoolVar(&o.verbose, "verbose", false, "log MCP sessions connecting and ending, not just warnings, to stderr")
	return cmd
}

// run serves one client on stdio until it disconnects or a signal comes;
// given says whether a flag was on the command line.
func (o *mcpOptions) run(ctx context.Context, given func(flag string) bool) error {
	if err := checkExecutor(o.backend, o.backendOpts); err != nil {
		return err
	}
	if o.limits.Timeout <= 0 {
		return errors.New("--timeout must be positive: a call without a time limit could hold its sandbox forever")
	}
	cfg := sandbox.Config{
		MaxSessions: o.maxSessions, DefaultTTL: o.ttl, DefaultIdle: o.idle, MaxTTL: o.caps.ttl, MaxIdle: o.caps.idle, Ceilings: o.ceilings,
		DefaultLimits: o.limits, MaxBytesPerOwner: sandbox.ShareOfMemory,
	}
	if err := o.paces.apply(&cfg); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := checkGivenLimits(o.limits, o.ceilings, given); err != nil {
		return err
	}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	backend, notes, err := serverBackend(o.backend, o.backendOpts, cfg, log)
	if err != nil {
		return err
	}
	logFit(log, notes)
	if cfg.Templates, err = serveTemplates(o.stateDir, log); err != nil {
		return err
	}
	cfg.Logger = log
	mgr := sandbox.NewManager(backend, cfg)
	defer mgr.Close()
	err = wardenmcp.ServeStdio(ctx, mgr, wardenmcp.Options{
		Owner: mcpOwner, AllowNetwork: o.allowNetwork, Version: version, Logger: log, Templates: cfg.Templates,
	})
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return nil // a signal is the ordinary way to stop
	}
	return err
}

// mcpLimitFlags are the limit flags of warden mcp, by the name
// spec.CeilingFields gives their limit.
var mcpLimitFlags = map[string]string{"timeout": "timeout", "memory": "memory", "cpus": "cpus", "pids": "pids", "disk": "disk"}

// checkGivenLimits refuses a limit flag the operator gave above its
// ceiling, naming both flags; one left at its default is lowered to the
// ceiling instead (by Config.Fit, which logs it).
func checkGivenLimits(l spec.Limits, c spec.Ceilings, given func(flag string) bool) error {
	_, above := c.Clamp(l)
	for _, e := range above {
		flag, ok := mcpLimitFlags[e.Field.Name]
		if !ok || !given(flag) {
			continue
		}
		value := e.Value
		if e.Unlimited {
			value = "0 (no limit)"
		}
		return fmt.Errorf("--%s %s is above --%s %s: lower --%s or raise --%s (0: no ceiling)", flag, value, e.Field.Flag, e.Ceiling, flag, e.Field.Flag)
	}
	return nil
}
