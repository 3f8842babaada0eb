// Package testhost holds the test helpers that decide whether this host can
// run a test. A test that needs something the host lacks skips with the
// reason, except under WARDEN_CI=1, where CI must run the whole suite and
// the same condition fails the test instead. It also makes the small file
// systems tests fill up or make read-only (Tmpfs, Fill).
package testhost

import (
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the suite runs in CI, where nothing may be skipped.
func InCI() bool { return os.Getenv("WARDEN_CI") == "1" }

// SkipOrFail skips t with reason, or fails it in CI.
func SkipOrFail(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("WARDEN_CI=1 and the host cannot run this test: %s", reason)
	}
	t.Skip(reason)
}

// RequireRoot skips (or fails in CI) unless the test runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		SkipOrFail(t, "needs root")
	}
}

// RequireTool skips (or fails in CI) unless name is on PATH, and returns
// its path.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		SkipOrFail(t, name+" is not installed (make deps installs it)")
	}
	return p
}
