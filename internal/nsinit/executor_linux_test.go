package nsinit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExecutor: warden-exec is found beside this executable only when it
// is there and trusted, and otherwise the error says what to do.
func TestExecutor(t *testing.T) {
	findInit()
	p := filepath.Join(filepath.Dir(self), ExecName)
	if _, err := os.Stat(p); err == nil {
		t.Skipf("%s exists beside the test binary", p)
	}
	_, err := Executor()
	if err == nil || !strings.Contains(err.Error(), "run make build") {
		t.Fatalf("Executor() without warden-exec: %v, want a not-found error saying run make build", err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Skipf("cannot write beside the test binary: %v", err)
	}
	defer os.Remove(p)
	if got, err := Executor(); err != nil || got != p {
		t.Errorf("Executor() = %q, %v; want %q", got, err, p)
	}
	if err := os.Chmod(p, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Executor(); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("Executor() of a world-writable warden-exec: %v, want ErrUntrusted naming why", err)
	}
}
