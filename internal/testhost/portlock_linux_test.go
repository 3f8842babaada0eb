package testhost

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHoldHostPort: while a test holds a port, another open file
// description (as another test process would have) cannot take the
// lock; once the test ends, it can.
func TestHoldHostPort(t *testing.T) {
	const port = 65000
	path := filepath.Join(os.TempDir(), fmt.Sprintf("warden-test-port-%d.lock", port))
	t.Run("hold", func(t *testing.T) {
		HoldHostPort(t, port)
		if err := tryLock(t, path); err == nil {
			t.Errorf("a second lock of %s succeeded while the test held it, want EWOULDBLOCK", path)
		}
	})
	if err := tryLock(t, path); err != nil {
		t.Errorf("locking %s after the holder ended: %v, want success", path, err)
	}
}

// tryLock opens path afresh and tries a non-blocking exclusive flock.
func tryLock(t *testing.T, path string) error {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	}()
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
}
