package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestExecutorUnrunnable: a warden-exec of this build's plan version that
// this machine cannot execute (its ELF machine patched to another
// architecture's) is no executor: a one-shot run under auto runs the
// program on the Go init instead of failing with exec format error.
func TestExecutorUnrunnable(t *testing.T) {
	requireSandbox(t)
	dir := wardenCopy(t)
	if err := buildExecOf(repoRoot, dir, func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "warden-exec")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Skipf("no warden-exec built here: %v", err)
	}
	machine := uint16(183) // aarch64
	if binary.LittleEndian.Uint16(b[18:]) == machine {
		machine = 62 // x86-64
	}
	binary.LittleEndian.PutUint16(b[18:], machine)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "warden"), "run", "--executor", "auto", "--", "echo", "ok")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil || out.String() != "ok\n" {
		t.Errorf("--executor auto with another machine's warden-exec: %v, stdout %q, stderr %q; want exit 0 and ok", err, out.String(), errb.String())
	}
}
