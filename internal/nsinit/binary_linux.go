package nsinit

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// InitName is the small init binary (cmd/warden-init) that Warden starts
// as each sandbox's init when it sits next to the warden binary. It holds
// only the init (nsinit, rootfs, seccomp): under a third of warden's
// size, so each sandbox faults in and tears down far fewer pages than when
// warden runs itself as the init, which it still does without one.
const InitName = "warden-init"

var (
	initOnce sync.Once
	// lean is the trusted InitName next to this executable, or "".
	lean string
	// self is this executable's path.
	self string
)

func findInit() {
	initOnce.Do(func() {
		var err error
		if self, err = os.Executable(); err != nil {
			return
		}
		if p := filepath.Join(filepath.Dir(self), InitName); trustedInit(p) {
			lean = p
		}
	})
}

// Binary is what to execute as a sandbox's init from this process: the
// small init if there is one, or /proc/self/exe, which stays this very
// binary even if the file is replaced while Warden runs.
func Binary() string {
	findInit()
	if lean != "" {
		return lean
	}
	return "/proc/self/exe"
}

// BinaryPath is the init as a path another process can open (a runtime
// binding it into a box): the small init, or this executable's path.
func BinaryPath() string {
	findInit()
	if lean != "" {
		return lean
	}
	return self
}

// trustedInit accepts an init only if no one but its owner, who must be
// this process's user or root, can change it: whoever can replace it runs
// code as every sandbox's init.
func trustedInit(p string) bool {
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 || fi.Mode().Perm()&0o100 == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || (st.Uid != 0 && int(st.Uid) != os.Geteuid()) {
		return false
	}
	dir, err := os.Stat(filepath.Dir(p))
	return err == nil && dir.Mode().Perm()&0o022 == 0
}
