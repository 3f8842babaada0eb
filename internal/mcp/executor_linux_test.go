package mcp

import (
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestOneOffExecutor: the executor given to the backend (warden mcp's and
// warden serve's --executor) builds the one-off runs the pool has no box
// for. This test binary has no warden-exec beside it, so fast refuses
// each run in one line, the tenant's (no flag, no host path), and go
// runs it.
func TestOneOffExecutor(t *testing.T) {
	testhost.RequireRoot(t)
	tests := []struct {
		executor native.Executor
		wantErr  string
	}{
		{native.ExecutorFast, "warden-exec, which is unavailable on it"},
		{native.ExecutorGo, ""},
	}
	for _, tt := range tests {
		backend, err := sandbox.NewBackend(sandbox.DefaultBackend, sandbox.BackendOptions{Executor: tt.executor})
		if err != nil {
			t.Fatalf("--executor %s: %v", tt.executor, err)
		}
		limits := spec.DefaultLimits
		limits.Timeout = 30 * time.Second
		mgr := sandbox.NewManager(backend, sandbox.Config{MaxSessions: 2, DefaultLimits: limits})
		cs, _ := connect(t, mgr, Options{Owner: "mcp"})
		res := call(t, cs, "run_command", map[string]any{"argv": []string{"echo", "alive"}})
		got := text(t, res)
		switch {
		case tt.wantErr != "" && (!res.IsError || !strings.Contains(got, tt.wantErr) || strings.Contains(strings.TrimSpace(got), "\n")):
			t.Errorf("--executor %s: run_command = error %v, %q; want one line containing %q", tt.executor, res.IsError, got, tt.wantErr)
		case tt.wantErr != "" && (strings.Contains(got, "--executor") || strings.Contains(got, "/")):
			t.Errorf("--executor %s: run_command = %q, which names a flag or a host path", tt.executor, got)
		case tt.wantErr == "" && (res.IsError || !strings.Contains(got, "alive")):
			t.Errorf("--executor %s: run_command = error %v, %q; want alive", tt.executor, res.IsError, got)
		}
		cs.Close()
		if err := mgr.Close(); err != nil {
			t.Errorf("--executor %s: closing the manager: %v", tt.executor, err)
		}
	}
}
