package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestExecutorOfOlderBuild: a warden-exec from before its plan version
// note (built from this tree without note.c, as earlier builds were) is
// still asked its version by running it, so a one-shot run under auto
// and under --executor fast runs the program as before the note.
func TestExecutorOfOlderBuild(t *testing.T) {
	requireSandbox(t)
	dir, err := os.MkdirTemp(filepath.Dir(wardenBin), "oldexec")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"warden", "warden-init"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(wardenBin), name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := buildExecOf(repoRoot, dir, func(name string) bool { return name != "note.c" }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "warden-exec")); err != nil {
		t.Skipf("no warden-exec built here: %v", err)
	}
	bin := filepath.Join(dir, "warden")
	for _, executor := range []string{"auto", "fast"} {
		t.Run(executor, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "run", "--executor", executor, "--", "echo", "ok")
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != 0 || out.String() != "ok\n" {
				t.Errorf("--executor %s: exit %d, stdout %q, stderr %q; want exit 0 and ok", executor, code, out.String(), errb.String())
			}
		})
	}
}
