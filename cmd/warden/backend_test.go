//go:build !slim

package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// TestBackendFlagNamesEveryBackend: the --backend help of every command
// that has one names every registered backend and defaults to the
// registry's default.
func TestBackendFlagNamesEveryBackend(t *testing.T) {
	for name, cmd := range map[string]*cobra.Command{"run": newRunCmd(), "serve": newServeCmd(), "mcp": newMCPCmd()} {
		f := cmd.Flags().Lookup("backend")
		if f == nil {
			t.Fatalf("%s has no --backend", name)
		}
		for _, b := range sandbox.BackendNames() {
			if !strings.Contains(f.Usage, b) {
				t.Errorf("%s --backend help %q does not name %q", name, f.Usage, b)
			}
		}
		if f.DefValue != sandbox.DefaultBackend {
			t.Errorf("%s --backend default = %q, want %q", name, f.DefValue, sandbox.DefaultBackend)
		}
	}
}
