package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/warden-sandbox/warden/internal/fontcache"
	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// runOptions are the `warden run` flags; their names are a contract.
type runOptions struct {
	spec        spec.Spec
	net         string
	backend     string
	backendOpts sandbox.BackendOptions
	json        bool
	// template and stateDir choose the root the program runs on.
	template, stateDir string
	// stdinListener hands this process's stdin, a listening unix stream
	// socket, to the program as its own (native.Runtime.ListenerStdin).
	stdinListener bool
}

func newRunCmd() *cobra.Command {
	o := &runOptions{spec: spec.Spec{Limits: spec.DefaultLimits}}
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARGS...]",
		Short: "Run one program in a fresh sandbox",
		Long: `Run one program in a fresh sandbox and remove every trace of it afterwards.

Output streams live and warden exits with the program's exit code (128+N when
signal N killed it, 124 on timeout, 127 when the command or its interpreter
does not exist in the sandbox, 126 when it cannot be executed, 125 when warden
itself failed). With --json, warden prints one Result object and exits 0, or
prints one whose "error" says why and exits 125 when it could not run the
program.`,
		Example: `  warden run -- python3 -c 'print(1)'
  warden run --memory 256MiB --timeout 10s -- sh -c 'echo hi'
  warden run --workspace "$PWD/out" -- python3 plot.py
  warden run --template datasci -- python3 -c 'import pandas'`,
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	f := cmd.Flags()
	f.SetInterspersed(false)
	l := &o.spec.Limits
	f.Var(durationFlag{&l.Timeout}, "timeout", "wall-clock limit; the whole sandbox is killed at it (0: none)")
	f.Var(sizeFlag{&l.MemoryBytes}, "memory", "memory limit, tmpfs included, no swap (0: none)")
	f.Int64Var(&l.Pids, "pids", l.Pids, "limit on the program's processes and threads (0: none)")
	f.Var(cpusFlag{&l.CPUs}, "cpus", "CPU bandwidth in cores (0: none)")
	f.Var(sizeFlag{&l.DiskBytes}, "disk", "size of the writable tmpfs (/tmp, home, /dev/shm, and /workspace without --workspace)")
	f.Var(sizeFlag{&l.OutputBytes}, "output-limit", "bytes captured per output stream; the rest is drained (0: keep nothing)")
	f.Var(durationFlag{&l.CPUTime}, "cpu-time", "CPU time per process, whole seconds (0: none)")
	f.Var(sizeFlag{&l.FileSizeBytes}, "file-size", "largest file a process may write (0: none)")
	f.Int64Var(&l.OpenFiles, "open-files", l.OpenFiles, "open file descriptors per process (0: inherited)")
	f.StringVar(&o.net, "net", string(spec.NetNone), "network: none (only lo) or proxy (egress allowlist)")
	f.Var(listFlag{&o.spec.Network.Allow}, "allow", "with --net proxy: allowed HOST[:PORT], repeatable, *.example.com wildcards")
	f.Var(listFlag{&o.spec.Network.Deny}, "deny", "with --net proxy: refused HOST[:PORT], repeatable; wins over --allow")
	f.StringVar(&o.spec.Workspace, "workspace", "", "host directory mounted read-write at /workspace (default: a private tmpfs)")
	f.Var(listFlag{&o.spec.Env}, "env", "KEY=VALUE added to the sandbox's clean environment, repeatable")
	f.StringVar(&o.template, "template", sandbox.HostTemplate, `root to run on: a template from warden template ls, or "host" (the host's own)`)
	f.StringVar(&o.stateDir, "state-dir", defaultStateDir(), "the state directory whose templates/ holds --template's store (as warden serve's)")
	addBackendFlags(f, &o.backend, "isolation backend", &o.backendOpts)
	f.BoolVar(&o.json, "json", false, "print one JSON Result instead of streaming output")
	// Hidden: for launchers such as the Kubernetes test bed's kubelet
	// (docs/kubernetes.md), which accept TCP on a host address and relay
	// each connection into the box; only a listening unix stream socket
	// and --net none are accepted.
	f.BoolVar(&o.stdinListener, "stdin-listener", false, "with --backend native and --net none: stdin is a listening unix stream socket, handed to the program as its stdin")
	// the flag was just added, so MarkHidden cannot fail
	_ = f.MarkHidden("stdin-listener")
	return cmd
}

func (o *runOptions) run(cmd *cobra.Command, args []string) error {
	release, err := o.prepare(args)
	if err == nil {
		defer release()
		err = o.check()
	}
	if err != nil {
		if o.json {
			return printJSON(cmd.OutOrStdout(), spec.Result{Error: err.Error()}, err)
		}
		return err
	}
	if onePSuffices(o.spec) {
		runtime.GOMAXPROCS(1)
	}
	// main's init pinned this goroutine to the main thread for the
	// sandbox init, which needs it; a run does not (the clone has a
	// locked thread of its own), and a pinned goroutine hands the P to
	// another thread each time it blocks and takes it back each time it
	// wakes (docs/performance.md, "Waiting without system calls").
	runtime.UnlockOSThread()
	// Only warnings reach stderr, the program's own stream when it is not
	// captured: a cleanup that failed, never the run's routine.
	o.backendOpts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A reader of our output that goes away (warden run ... | head) must
	// not kill warden before it has cleaned up: with SIGPIPE caught, the
	// write fails with EPIPE and the run goes on to its end. Caught, not
	// ignored, so the sandbox does not inherit an ignored SIGPIPE.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	stdio := native.IO{Stdin: os.Stdin}
	if o.stdinListener {
		stdio.Stdin = nil
	}
	if !o.json {
		stdio.Stdout, stdio.Stderr = os.Stdout, os.Stderr
	}
	r, err := o.execute(ctx, stdio)
	if o.json {
		return printJSON(cmd.OutOrStdout(), r, err)
	}
	if err != nil {
		return err
	}
	return exitError{code: o.report(r)}
}

// onePSuffices says whether a run keeps to one P. A run without a proxy
// does serial work, and a second P only costs: each time a goroutine wakes
// (a pace of the output drain, tens a second while a sandbox floods), the
// scheduler wakes another thread to look for work it never finds, host
// CPU no cgroup is charged for (docs/interpreters.md, "Output"); measured
// again once the run waited in the poller, two Ps still cost more
// (docs/performance.md, "Waiting without system calls"). With
// --net proxy the egress proxy runs in this process beside the output
// drains, and one P would make the sandbox's connections wait on them.
func onePSuffices(s spec.Spec) bool {
	return s.Network.Mode != spec.NetProxy
}

// resolveTemplate sets the spec's root to --template's, leased from the
// store for the run (the release is returned), or leaves the host's.
func (o *runOptions) resolveTemplate() (func(), error) {
	if o.template == "" || o.template == sandbox.HostTemplate {
		return func() {}, nil
	}
	ts, err := openTemplates(o.stateDir)
	if err != nil {
		return nil, fmt.Errorf("--template %s: %w", o.template, err)
	}
	root, release, err := ts.operatorResolve(o.template)
	if err != nil {
		return nil, fmt.Errorf("--template %s: %w", o.template, err)
	}
	o.spec.Root = root
	return release, nil
}

// prepare fills o's spec from the command line (args, --net, an absolute
// --workspace) and resolves --template. The agent transport is the
// backend's own (sandbox.SessionTransport), as for the server's one-shot
// runs and sessions: one rule, so on gVisor a run, too, leaves no host
// descriptor in the box but its stdin (egress goes over the stream).
func (o *runOptions) prepare(args []string) (release func(), err error) {
	o.spec.Command = args
	o.spec.Network.Mode = spec.NetMode(o.net)
	o.backendOpts.AgentTransport = sandbox.SessionTransport(o.backend, "")
	if o.spec.Workspace != "" {
		abs, err := filepath.Abs(o.spec.Workspace)
		if err != nil {
			return nil, fmt.Errorf("workspace %q: %w", o.spec.Workspace, err)
		}
		o.spec.Workspace = abs
	}
	return o.resolveTemplate()
}

// check refuses a bad request before anything is built.
func (o *runOptions) check() error {
	if _, err := sandbox.NewBackend(o.backend, o.backendOpts); err != nil {
		return err
	}
	if err := checkExecutor(o.backend, o.backendOpts); err != nil {
		return err
	}
	if err := o.checkStdinListener(); err != nil {
		return err
	}
	return o.spec.Validate()
}

// checkStdinListener refuses --stdin-listener but with the native
// backend, the only one that takes a listener (native.Runtime.ListenerStdin);
// what the listener must be, and --net none, native.Runtime.Run checks.
func (o *runOptions) checkStdinListener() error {
	if o.stdinListener && o.backend != "native" {
		return fmt.Errorf("--stdin-listener works with --backend native only, not %s", o.backend)
	}
	return nil
}

// execute runs the spec on the chosen backend; native runs directly,
// without a session's agent.
func (o *runOptions) execute(ctx context.Context, stdio native.IO) (spec.Result, error) {
	if o.backend == "native" {
		if s, ok := fontcache.DefaultStore(); ok {
			native.UseFontCache(s)
		}
		rt := native.Runtime{Logger: o.backendOpts.Logger, Executor: o.backendOpts.Executor}
		if o.stdinListener {
			rt.ListenerStdin = os.Stdin
		}
		return rt.Run(ctx, o.spec, stdio)
	}
	b, err := sandbox.NewBackend(o.backend, o.backendOpts)
	if err != nil {
		return spec.Result{}, err
	}
	return b.Run(ctx, o.spec, stdio.Stdin, sandbox.Stream{Stdout: stdio.Stdout, Stderr: stdio.Stderr})
}

// report prints warden's one-line notes about how the run ended and
// returns the exit code of the CLI convention.
func (o *runOptions) report(r spec.Result) int {
	limit := spec.FormatSize(o.spec.Limits.OutputBytes)
	if r.StdoutTruncated {
		fmt.Fprintf(os.Stderr, "warden: stdout truncated at %s (--output-limit)\n", limit)
	}
	if r.StderrTruncated {
		fmt.Fprintf(os.Stderr, "warden: stderr truncated at %s (--output-limit)\n", limit)
	}
	switch {
	case r.TimedOut:
		fmt.Fprintf(os.Stderr, "warden: timed out after %s (--timeout); the sandbox was killed\n", o.spec.Limits.Timeout)
		return exitTimeout
	case r.OOMKilled:
		fmt.Fprintf(os.Stderr, "warden: out of memory at %s (--memory); the kernel killed the program\n", spec.FormatSize(o.spec.Limits.MemoryBytes))
	}
	return r.ExitCode
}

func printJSON(w io.Writer, r spec.Result, runErr error) error {
	if runErr != nil && r.Error == "" {
		// The Result says Warden failed, so a reader of the JSON alone
		// never takes it for an exit 0.
		r.Error = runErr.Error()
	}
	if err := r.WriteJSON(w); err != nil {
		return err
	}
	if runErr != nil {
		fmt.Fprintf(os.Stderr, "warden: %v\n", runErr)
		return exitError{code: exitWardenFailed}
	}
	return nil
}
