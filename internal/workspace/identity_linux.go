package workspace

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// identity is the file identity the host takes on to act in a workspace.
type identity struct {
	uid, gid int
	// skip is set when the process already runs as uid (rootless), which
	// then has no other identity to take on.
	skip bool
}

// run calls fn on a thread whose file identity is the sandbox user's:
// fsgid and fsuid set to it (which, from fsuid 0, drops the file
// capabilities: DAC override, DAC read-search, fowner, chown, mknod) and no
// supplementary groups, so that root's groups grant nothing either. The
// credentials are per thread, so the goroutine is locked to its thread;
// the thread returns to the scheduler only if restoring root's identity
// succeeded, and otherwise dies with the goroutine. Go starts new threads
// from a clean template thread, never from a locked one, so no other
// goroutine inherits the identity.
func (id identity) run(fn func() error) error {
	if id.skip {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restore, err := id.enter()
		if err == nil {
			err = fn()
		}
		if restore() == nil {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// enter switches the calling thread to the identity and returns the
// function that switches it back, which must be called even on error.
func (id identity) enter() (restore func() error, err error) {
	groups, err := unix.Getgroups()
	if err != nil {
		return func() error { return nil }, fmt.Errorf("reading supplementary groups: %w", err)
	}
	// setfsuid and setfsgid cannot report failure; they return the
	// previous value, and an invalid id (-1) only queries it.
	oldGID, _ := unix.SetfsgidRetGid(-1)
	oldUID, _ := unix.SetfsuidRetUid(-1)
	restore = func() error {
		// Their errors are always nil (see above): the queries below
		// check that the switch took.
		_ = unix.Setfsuid(oldUID)
		_ = unix.Setfsgid(oldGID) // checked by query below, as the fsuid is
		if err := unix.Setgroups(groups); err != nil {
			return fmt.Errorf("restoring supplementary groups: %w", err)
		}
		if uid, _ := unix.SetfsuidRetUid(-1); uid != oldUID {
			return fmt.Errorf("restoring fsuid %d: still %d", oldUID, uid)
		}
		if gid, _ := unix.SetfsgidRetGid(-1); gid != oldGID {
			return fmt.Errorf("restoring fsgid %d: still %d", oldGID, gid)
		}
		return nil
	}
	if err := unix.Setgroups(nil); err != nil {
		return restore, fmt.Errorf("dropping supplementary groups to act as uid %d: %w (needs CAP_SETGID)", id.uid, err)
	}
	_ = unix.Setfsgid(id.gid) // always nil: checked by the queries below
	_ = unix.Setfsuid(id.uid) // always nil too: checked by the queries below
	if gid, _ := unix.SetfsgidRetGid(-1); gid != id.gid {
		return restore, fmt.Errorf("switching to fsgid %d: still %d (needs CAP_SETGID)", id.gid, gid)
	}
	if uid, _ := unix.SetfsuidRetUid(-1); uid != id.uid {
		return restore, fmt.Errorf("switching to fsuid %d: still %d (needs CAP_SETUID)", id.uid, uid)
	}
	return restore, nil
}
