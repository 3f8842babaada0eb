// Package e2e tests the built warden binary from the outside, as a user or
// an agent would call it. Every test is bounded in time, and hostile ones
// stay harmless even if the sandbox under test were broken: they prove a
// weakness by opening a host-wide file for writing, never by writing it, and
// send traffic only to loopback.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/microvm"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// wardenBin is the binary under test, built once by TestMain into a
// directory every user can read, so rootless tests can run it too.
var wardenBin string

func TestMain(m *testing.M) {
	if os.Getenv(inetEnv) == "1" {
		serveInternet()
		return
	}
	dir, err := os.MkdirTemp("", "warden-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if err := os.Chmod(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// warden slim and warden-server whole beside it, as make build
		// ships them: the serving commands run through the hand-over.
		wardenBin = filepath.Join(dir, "warden")
		if out, err := goBuild(wardenBin, "github.com/warden-sandbox/warden/cmd/warden", nil, "-tags", "slim"); err != nil {
			fmt.Fprintf(os.Stderr, "building warden: %v\n%s", err, out)
			return 1
		}
		if out, err := goBuild(filepath.Join(dir, "warden-server"), "github.com/warden-sandbox/warden/cmd/warden", nil); err != nil {
			fmt.Fprintf(os.Stderr, "building warden-server: %v\n%s", err, out)
			return 1
		}
		// The small init beside it, and warden-exec where the tree has
		// it, as make build ships them.
		if out, err := goBuild(filepath.Join(dir, "warden-init"), "github.com/warden-sandbox/warden/cmd/warden-init", nil, "-ldflags", microvm.InitLDFlags()); err != nil {
			fmt.Fprintf(os.Stderr, "building warden-init: %v\n%s", err, out)
			return 1
		}
		if err := buildExec(repoRoot, dir); err != nil {
			fmt.Fprintf(os.Stderr, "building warden-exec: %v\n", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// goBuild builds a static binary of pkg at out, with extra environment
// and build flags.
func goBuild(out, pkg string, env []string, flags ...string) ([]byte, error) {
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	cmd := exec.Command("go", args...)
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), env...)
	return cmd.CombinedOutput()
}

// cmdTimeout bounds every warden invocation, far above what any test needs.
const cmdTimeout = 90 * time.Second

// invocation is one finished warden process.
type invocation struct {
	stdout, stderr string
	code           int
}

// warden runs the binary with args and stdin, as the current user.
func warden(t *testing.T, stdin string, args ...string) invocation {
	t.Helper()
	return wardenAs(t, nil, stdin, args...)
}

// wardenAs runs the binary under a prefix command (setpriv for rootless).
func wardenAs(t *testing.T, prefix []string, stdin string, args ...string) invocation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	args = withExecutor(args)
	argv := append(append(append([]string{}, prefix...), wardenBin), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	inv := invocation{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		inv.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running warden %q: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("warden %q did not finish within %s", args, cmdTimeout)
	}
	return inv
}

// runJSON runs `warden run --json FLAGS -- CMD...` and decodes the Result.
// flags and command are split by the literal "--" in args.
func runJSON(t *testing.T, args ...string) spec.Result {
	t.Helper()
	inv := warden(t, "", append([]string{"run", "--json"}, args...)...)
	var r spec.Result
	if err := json.Unmarshal([]byte(inv.stdout), &r); err != nil {
		t.Fatalf("warden run %q: exit %d, stdout %q, stderr %q: not a Result: %v", args, inv.code, inv.stdout, inv.stderr, err)
	}
	return r
}

// sh runs a shell snippet in a default sandbox and returns the Result.
func sh(t *testing.T, script string, flags ...string) spec.Result {
	t.Helper()
	return runJSON(t, append(flags, "--", "sh", "-c", script)...)
}

// workspaceOwner owns the host directories the tests pass as --workspace.
// As root, Warden refuses a root-owned workspace (the sandbox writes as the
// directory's owner), so test directories are given to this ordinary uid.
const workspaceOwner = 4242

// hostWorkspace makes dir a usable workspace: readable by everyone and,
// as root, owned by workspaceOwner.
func hostWorkspace(t *testing.T, dir string) string {
	t.Helper()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, workspaceOwner, workspaceOwner); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// requireSandbox skips or fails unless sandboxes can be built here (root).
func requireSandbox(t *testing.T) {
	t.Helper()
	testhost.RequireRoot(t)
}
