package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// repoRoot is the tree under test, seen from this package's directory.
const repoRoot = "../.."

// buildExec builds warden-exec (cmd/warden-exec, the fast executor of
// issue 20) into dir beside warden and warden-init, as make build ships
// them, when the tree has it. The compiler and flags are the Makefile's
// own (CC and EXEC_CFLAGS, printed by make), so they have one source.
func buildExec(root, dir string) error {
	return buildExecOf(root, dir, func(string) bool { return true })
}

// buildExecOf is buildExec from the C sources keep accepts (by base name).
func buildExecOf(root, dir string, keep func(string) bool) error {
	src := filepath.Join(root, "cmd", "warden-exec")
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	all, err := filepath.Glob(filepath.Join(src, "*.c"))
	if err != nil || len(all) == 0 {
		return fmt.Errorf("%s: no C sources (%w)", src, err)
	}
	var srcs []string
	for _, s := range all {
		if keep(filepath.Base(s)) {
			srcs = append(srcs, s)
		}
	}
	cc, flags, err := execCompiler(root)
	if err != nil {
		return err
	}
	args := append(append(flags, "-o", filepath.Join(dir, "warden-exec")), srcs...)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", cc, strings.Join(args, " "), err, out)
	}
	return nil
}

// execCompiler asks make for the compiler and the flags make build
// compiles warden-exec with, by a rule given on make's command line
// that prints $(CC) and $(EXEC_CFLAGS).
func execCompiler(root string) (string, []string, error) {
	const rule = "warden-e2e-exec-flags: ; @printf '%s\\n' '$(CC)' '$(EXEC_CFLAGS)'"
	cmd := exec.Command("make", "-s", "--no-print-directory", "-C", root, "--eval", rule, "warden-e2e-exec-flags")
	out, err := cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("asking make for warden-exec's compiler and EXEC_CFLAGS: %w", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 2 || strings.TrimSpace(lines[0]) == "" || strings.TrimSpace(lines[1]) == "" {
		return "", nil, fmt.Errorf("make printed %q, want the compiler and a non-empty EXEC_CFLAGS on two lines: does the Makefile set EXEC_CFLAGS?", out)
	}
	cc := strings.Fields(lines[0]) // CC may carry words of its own, e.g. "ccache gcc"
	return cc[0], append(cc[1:], strings.Fields(lines[1])...), nil
}
