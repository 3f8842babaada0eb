package nsinit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/plan"
)

// TestExecutor: warden-exec is found beside this executable only when it
// is there, trusted and of this build, and otherwise the error says what
// to do. It calls findExecutor, as Executor keeps its first answer.
func TestExecutor(t *testing.T) {
	findInit()
	p := filepath.Join(filepath.Dir(self), ExecName)
	if _, err := os.Stat(p); err == nil {
		t.Skipf("%s exists beside the test binary", p)
	}
	_, err := findExecutor()
	if err == nil || !strings.Contains(err.Error(), "run make build") {
		t.Fatalf("Executor() without warden-exec: %v, want a not-found error saying run make build", err)
	}
	if err := os.WriteFile(p, elfWith(versionNote(plan.Version)), 0o755); err != nil {
		t.Skipf("cannot write beside the test binary: %v", err)
	}
	defer os.Remove(p)
	if got, err := findExecutor(); err != nil || got != p {
		t.Errorf("Executor() = %q, %v; want %q", got, err, p)
	}
	if err := os.Chmod(p, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := findExecutor(); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("Executor() of a world-writable warden-exec: %v, want ErrUntrusted naming why", err)
	}
}
