// Command warden-init is the sandbox init alone: what warden starts as
// each sandbox's PID 1 when this binary sits next to it (see
// nsinit.InitName). It links only the init's packages, so each sandbox
// loads a third of warden's size; warden can still be its own init. It is
// also a microVM guest's /init (vmguest), in the initramfs warden builds,
// and a Kubernetes sandbox Pod's process ("warden-init pod", podinit).
package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/podinit"
	"github.com/warden-sandbox/warden/internal/spawn"
	"github.com/warden-sandbox/warden/internal/vmguest"
)

// init pins main to the process's main thread, as warden's main does:
// the init's parent-death signal and credentials are per thread.
func init() { runtime.LockOSThread() }

func main() {
	if vmguest.IsGuest(os.Args) {
		vmguest.Main()
	}
	if podinit.IsPod(os.Args) {
		podinit.Main()
	}
	if nsinit.IsInit(os.Args) {
		nsinit.Main()
	}
	if spawn.IsSpawner(os.Args) {
		spawn.Main()
	}
	fmt.Fprintln(os.Stderr, "warden-init is started by warden as a sandbox's init; run warden instead")
	os.Exit(2)
}
