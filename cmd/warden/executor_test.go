//go:build !slim

package main

import (
	"context"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// TestServeMCPCheckExecutor: warden serve and warden mcp refuse a bad
// --executor in one line before they build or listen on anything, as
// warden run does.
func TestServeMCPCheckExecutor(t *testing.T) {
	tests := []struct {
		backend, executor, wantErr string
	}{
		{"native", "rust", `--executor "rust": want one of auto, go, fast`},
		{"gvisor", "fast", "--executor fast: only --backend native has a choice of executor"},
	}
	for _, tt := range tests {
		opts := sandbox.BackendOptions{Executor: native.Executor(tt.executor)}
		so := serveOptions{backend: tt.backend, backendOpts: opts, bodyTimeout: time.Second}
		err := serve(context.Background(), so)
		if err == nil || err.Error() != tt.wantErr {
			t.Errorf("serve --backend %s --executor %s: %v, want %q", tt.backend, tt.executor, err, tt.wantErr)
		}
		mo := &mcpOptions{backend: tt.backend, backendOpts: opts}
		err = mo.run(context.Background(), func(string) bool { return false })
		if err == nil || err.Error() != tt.wantErr {
			t.Errorf("mcp --backend %s --executor %s: %v, want %q", tt.backend, tt.executor, err, tt.wantErr)
		}
	}
}
