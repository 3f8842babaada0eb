package testhost

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Executor builds warden-exec from cmd/warden-exec as make build does
// (the Makefile's EXEC_CFLAGS, asked of make, so there is one list of
// flags) into t's temporary directory, and returns its path. It skips
// (or fails in CI) without make or gcc.
func Executor(t testing.TB) string {
	t.Helper()
	mk, cc := RequireTool(t, "make"), RequireTool(t, "gcc")
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("finding the repository from the test helper's source")
	}
	root := filepath.Join(filepath.Dir(self), "..", "..")
	flags, err := exec.Command(mk, "-s", "-C", root, "print-exec-cflags").Output()
	if err != nil {
		t.Fatalf("asking make for EXEC_CFLAGS: %v", err)
	}
	srcs, err := filepath.Glob(filepath.Join(root, "cmd", "warden-exec", "*.c"))
	if err != nil || len(srcs) == 0 {
		t.Fatalf("finding warden-exec's sources: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "warden-exec")
	args := append(append(strings.Fields(string(flags)), "-o", bin), srcs...)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("building warden-exec: %v: %s", err, out)
	}
	return bin
}
