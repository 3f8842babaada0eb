package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestExecutorOfOlderBuild: a warden-exec without its plan version note
// but of this plan version (this tree without note.c) is asked its
// version by running it, so a one-shot run under auto and under
// --executor fast runs the program as before the note.
// TestExecutorOfRealOlderBuild checks the same path with a real build
// from before the note.
func TestExecutorOfOlderBuild(t *testing.T) {
	requireSandbox(t)
	dir := wardenCopy(t)
	if err := buildExecOf(repoRoot, dir, func(name string) bool { return name != "note.c" }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "warden-exec")); err != nil {
		t.Skipf("no warden-exec built here: %v", err)
	}
	bin := filepath.Join(dir, "warden")
	for _, executor := range []string{"auto", "fast"} {
		t.Run(executor, func(t *testing.T) {
			code, out, errb := runWarden(t, bin, executor)
			if code != 0 || out != "ok\n" {
				t.Errorf("--executor %s: exit %d, stdout %q, stderr %q; want exit 0 and ok", executor, code, out, errb)
			}
		})
	}
}

// beforeNote is a commit whose warden-exec predates its plan version
// note and reads plan version 2.
const beforeNote = "111df43"

// TestExecutorOfRealOlderBuild installs warden-exec built from
// beforeNote's sources beside this warden. Without a note it can only be
// asked its version by running it: --executor fast refuses it in the
// line that quotes what it printed ("2\n", which only the probe reads),
// and auto still runs the program (in the Go init).
func TestExecutorOfRealOlderBuild(t *testing.T) {
	requireSandbox(t)
	src := t.TempDir()
	if err := exportExecSources(beforeNote, src); err != nil {
		if os.Getenv("WARDEN_CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := wardenCopy(t)
	cc, flags, err := testhost.ExecCompiler(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := filepath.Glob(filepath.Join(src, "*.c"))
	if err != nil || len(srcs) == 0 {
		t.Fatalf("%s's warden-exec: no C sources (%v)", beforeNote, err)
	}
	args := append(append(flags, "-o", filepath.Join(dir, "warden-exec")), srcs...)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, out)
	}
	bin := filepath.Join(dir, "warden")
	for _, tc := range []struct {
		executor, stdout, stderr string
		code                     int
	}{
		{"fast", "", `reads plan version "2\n" but this warden writes version`, 1},
		{"auto", "ok\n", "", 0},
	} {
		t.Run(tc.executor, func(t *testing.T) {
			code, out, errb := runWarden(t, bin, tc.executor)
			if (code == 0) != (tc.code == 0) || out != tc.stdout || !strings.Contains(errb, tc.stderr) {
				t.Errorf("--executor %s: exit %d, stdout %q, stderr %q; want exit %s, stdout %q, stderr containing %q", tc.executor, code, out, errb, map[bool]string{true: "0", false: "non-zero"}[tc.code == 0], tc.stdout, tc.stderr)
			}
		})
	}
}

// exportExecSources writes commit's cmd/warden-exec sources into dir,
// from git.
func exportExecSources(commit, dir string) error {
	names, err := exec.Command("git", "-C", repoRoot, "ls-tree", "--name-only", commit+":cmd/warden-exec").Output()
	if err != nil {
		return fmt.Errorf("listing warden-exec's sources at %s (git history needed): %w", commit, err)
	}
	for _, name := range strings.Fields(string(names)) {
		b, err := exec.Command("git", "-C", repoRoot, "show", commit+":cmd/warden-exec/"+name).Output()
		if err != nil {
			return fmt.Errorf("reading %s at %s: %w", name, commit, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// wardenCopy copies warden and warden-init into a new directory beside
// them, where a test installs a warden-exec of its own.
func wardenCopy(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(filepath.Dir(wardenBin), "execcopy")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("removing %s: %v", dir, err)
		}
	})
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
	return dir
}

// runWarden runs bin run --executor executor -- echo ok, bounded by
// cmdTimeout, and returns its exit code, stdout and stderr.
func runWarden(t *testing.T, bin, executor string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--executor", executor, "--", "echo", "ok")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String(), errb.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}
