package testhost

import (
	"fmt"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// InMountNS runs f on a thread of its own in a new mount namespace whose
// mounts are private, so nothing the test mounts reaches the host's (we
// run as root). The thread is never unlocked, so the runtime ends it, and
// its namespace, when f returns. It needs root (see RequireRoot). Code in
// f that reads the mount table must read the thread's,
// /proc/thread-self/mountinfo: /proc/self is the process's main thread,
// which stays in the host's namespace. f runs on another goroutine, so it
// must report failure by its error, never by t.Fatal, t.Skip or
// t.FailNow: they would end that goroutine without an answer, and
// InMountNS would wait for one forever.
func InMountNS(t testing.TB, f func() error) error {
	t.Helper()
	RequireRoot(t)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- fmt.Errorf("unsharing the mount namespace: %w", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			done <- fmt.Errorf("making the mounts private: %w", err)
			return
		}
		done <- f()
	}()
	return <-done
}
