package testhost

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// ExecCompiler asks make (in the repository at root) for the compiler
// and the flags make build compiles warden-exec with, by a rule given on
// make's command line that prints $(CC) and $(EXEC_CFLAGS): the one list
// of flags, and the compiler make would take (CC may carry words of its
// own, e.g. "ccache gcc").
func ExecCompiler(root string) (string, []string, error) {
	const rule = "warden-test-exec-flags: ; @printf '%s\\n' '$(CC)' '$(EXEC_CFLAGS)'"
	cmd := exec.Command("make", "-s", "--no-print-directory", "-C", root, "--eval", rule, "warden-test-exec-flags")
	out, err := cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("asking make for warden-exec's compiler and EXEC_CFLAGS: %w", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 2 || strings.TrimSpace(lines[0]) == "" || strings.TrimSpace(lines[1]) == "" {
		return "", nil, fmt.Errorf("make printed %q, want the compiler and a non-empty EXEC_CFLAGS on two lines: does the Makefile set EXEC_CFLAGS?", out)
	}
	cc := strings.Fields(lines[0])
	return cc[0], append(cc[1:], strings.Fields(lines[1])...), nil
}

// Executor builds warden-exec from cmd/warden-exec as make build does
// (ExecCompiler's compiler and flags) into t's temporary directory, and
// returns its path. It skips (or fails in CI) without make or the
// compiler.
func Executor(t testing.TB) string {
	t.Helper()
	RequireTool(t, "make")
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("finding the repository from the test helper's source")
	}
	root := filepath.Join(filepath.Dir(self), "..", "..")
	cc, flags, err := ExecCompiler(root)
	if err != nil {
		t.Fatal(err)
	}
	RequireTool(t, cc)
	srcs, err := filepath.Glob(filepath.Join(root, "cmd", "warden-exec", "*.c"))
	if err != nil || len(srcs) == 0 {
		t.Fatalf("finding warden-exec's sources: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "warden-exec")
	args := append(append(flags, "-o", bin), srcs...)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("building warden-exec: %s %s: %v: %s", cc, strings.Join(args, " "), err, out)
	}
	return bin
}
