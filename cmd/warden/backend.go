package main

import (
	"github.com/spf13/pflag"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// addBackendFlags adds --backend, whose help lists every registered
// backend (what says what it isolates), and the settings of the backends
// that have any.
func addBackendFlags(f *pflag.FlagSet, name *string, what string, o *sandbox.BackendOptions) {
	f.StringVar(name, "backend", sandbox.DefaultBackend, what+": "+sandbox.BackendChoices())
	f.StringVar(&o.Runsc, "runsc", "", "runsc binary for --backend gvisor (default: runsc on PATH)")
	f.StringVar(&o.Platform, "runsc-platform", "", "runsc platform for --backend gvisor: ptrace, systrap or kvm (default: runsc's)")
	f.StringVar(&o.Image, "image", "", "image for --backend docker (default: an image Warden builds from the host's root, as native sees it)")
}
