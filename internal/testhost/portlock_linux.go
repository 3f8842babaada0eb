package testhost

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// portLockWait bounds how long HoldHostPort waits for another test
// process to release the port: the longest user (kubeback's bed egress
// subtest, with its latency rounds) holds it for a few minutes.
const portLockWait = 15 * time.Minute

// HoldHostPort serialises, across this host's test processes, the tests
// that bind port on the host's own network namespace (go test ./... runs
// packages in parallel, and the Pods of poddial's and kubeback's tests
// both share the host's loopback): it takes an exclusive flock on a file
// under os.TempDir named for the port and holds it until t ends. It waits
// at most portLockWait, then fails t naming the file.
func HoldHostPort(t testing.TB, port int) {
	t.Helper()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("warden-test-port-%d.lock", port))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatalf("opening the lock of host port %d: %v", port, err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil { // closing releases the flock
			t.Logf("releasing %s: %v", path, err)
		}
	})
	deadline := time.Now().Add(portLockWait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			t.Fatalf("locking %s: %v", path, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("another test process held %s (host port %d) for more than %v", path, port, portLockWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
