package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// leaseWait bounds how long TestLeasedFile waits for Read: far below the
// lease-break time (45 s by default) that a blocking open would wait, so a
// broken Read fails the test instead of stalling it.
const leaseWait = 10 * time.Second

// TestLeasedFile takes a write lease (fcntl F_SETLEASE) on a workspace
// file, as a process in the sandbox could on its own files were the
// seccomp filter not refusing F_SETLEASE, and checks that
// Read refuses it at once with ErrBusy instead of waiting for the lease
// to break while holding a copy slot.
func TestLeasedFile(t *testing.T) {
	forEachIdentity(t, Limits{}, func(t *testing.T, e *env) {
		path := filepath.Join(e.ws, "leased")
		writeFile(t, path, "data", 0o644)
		e.give(t)
		holder := takeLease(t, path)
		done := make(chan error, 1)
		go func() {
			rc, _, err := e.d.Read("leased")
			if err == nil {
				rc.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "lease") || strings.Contains(err.Error(), "\n") {
				t.Errorf("Read of a leased file: error = %v, want one line wrapping ErrBusy that names the lease", err)
			}
		case <-time.After(leaseWait):
			holder.Close() // breaks the lease, so the blocked Read returns
			t.Fatalf("Read of a leased file still waits after %v; it must not wait for the lease to break", leaseWait)
		}
	})
}

// takeLease opens path and takes a write lease on it, which the test
// holds until its end.
func takeLease(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		testhost.SkipOrFail(t, "taking a write lease (fcntl F_SETLEASE): "+err.Error()+"; is fs.leases-enable 0?")
	}
	return f
}
