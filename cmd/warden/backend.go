package main

import (
	"fmt"
	"slices"

	"github.com/spf13/pflag"

	"github.com/warden-sandbox/warden/internal/gvisor"
	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// addBackendFlags adds --backend, whose help lists every registered
// backend (what says what it isolates), and the settings of the backends
// that have any. run, serve and mcp share them, so --executor means the
// same everywhere: what builds a native one-shot sandbox.
func addBackendFlags(f *pflag.FlagSet, name *string, what string, o *sandbox.BackendOptions) {
	f.StringVar(name, "backend", sandbox.DefaultBackend, what+": "+sandbox.BackendChoices())
	f.StringVar(&o.Runsc, "runsc", "", "runsc binary for --backend gvisor (default: "+gvisor.DefaultRunsc+", which make runsc installs, else runsc on PATH)")
	f.StringVar(&o.Platform, "runsc-platform", "", "runsc platform for --backend gvisor: ptrace, systrap or kvm (default: runsc's)")
	f.StringVar(&o.Image, "image", "", "image for --backend docker (default: an image Warden builds from the host's root, as native sees it)")
	o.Executor = native.ExecutorAuto
	f.StringVar((*string)(&o.Executor), "executor", string(native.ExecutorAuto), "what builds a --backend native one-shot sandbox: auto, go (the Go init) or fast (warden-exec, no Go runtime); sessions and pooled sandboxes keep the Go init")
}

// checkExecutor refuses an unknown backend (first, as NewBackend words
// it), an unknown --executor or --agent-transport, and one other than
// the default for a backend that has no such choice, in one line each.
func checkExecutor(backend string, o sandbox.BackendOptions) error {
	if backend != "" && !slices.Contains(sandbox.BackendNames(), backend) {
		return fmt.Errorf("backend %q is unknown: use %s", backend, sandbox.BackendChoices())
	}
	if err := o.Executor.Validate(); err != nil {
		return fmt.Errorf("--%w", err)
	}
	if backend != "" && backend != sandbox.DefaultBackend && o.Executor != native.ExecutorAuto && o.Executor != "" {
		return fmt.Errorf("--executor %s: only --backend %s has a choice of executor", o.Executor, sandbox.DefaultBackend)
	}
	if err := o.AgentTransport.Validate(); err != nil {
		return fmt.Errorf("--agent-transport %q: want %s", o.AgentTransport, native.TransportChoices())
	}
	if o.AgentTransport == native.TransportStream && !sandbox.HasTransportChoice(backend) {
		return fmt.Errorf("--agent-transport stream: only --backend %s have a choice of agent transport", sandbox.TransportBackends())
	}
	return nil
}
