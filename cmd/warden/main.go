// Command warden runs untrusted code in an isolated Linux sandbox.
//
// The same binary is also the sandbox's init: the native backend re-executes
// /proc/self/exe with argv[0] set to nsinit.Arg0, and main hands control to
// the init before any flag parsing or CLI setup can run.
package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/spawn"
)

// init pins main to the process's main thread. The sandbox init relies on
// it: its parent-death signal and credentials are per thread, and the
// kernel delivers that signal to the thread the host cloned.
func init() { runtime.LockOSThread() }

func main() {
	if nsinit.IsInit(os.Args) {
		nsinit.Main()
	}
	if spawn.IsSpawner(os.Args) {
		spawn.Main()
	}
	if native.IsFontBuilder(os.Args) {
		native.FontBuilderMain()
	}
	if err := checkHandoff(); err != nil {
		fmt.Fprintln(os.Stderr, "warden: "+err.Error())
		os.Exit(exitWardenFailed)
	}
	os.Exit(execute(os.Args[1:]))
}
