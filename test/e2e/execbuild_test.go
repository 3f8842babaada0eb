package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/warden-sandbox/warden/internal/testhost"
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
	cc, flags, err := testhost.ExecCompiler(root)
	if err != nil {
		return err
	}
	args := append(append(flags, "-o", filepath.Join(dir, "warden-exec")), srcs...)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", cc, strings.Join(args, " "), err, out)
	}
	return nil
}
