//go:build !slim

package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/warden-sandbox/warden/internal/native"
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

// TestAgentTransportFlag: --agent-transport is on serve and mcp only
// (run's sandboxes have no snapshot for the stream to keep), shown, its
// default each backend's own, and a bad value or a backend without the
// choice is refused in one line naming the flag.
func TestAgentTransportFlag(t *testing.T) {
	for name, cmd := range map[string]*cobra.Command{"run": newRunCmd(), "serve": newServeCmd(), "mcp": newMCPCmd()} {
		f := cmd.Flags().Lookup("agent-transport")
		switch {
		case name == "run" && f != nil:
			t.Errorf("run has --agent-transport, which it would ignore")
		case name != "run" && (f == nil || f.Hidden || f.DefValue != "" || !strings.Contains(f.Usage, "default: fd on native, stream on gvisor")):
			t.Errorf("%s --agent-transport = %+v, want a shown flag whose default is each backend's", name, f)
		}
	}
	for _, tc := range []struct {
		backend   string
		transport native.AgentTransport
		want      string
	}{
		{"native", "bogus", `--agent-transport "bogus": want fd or stream`},
		{"docker", native.TransportStream, "--agent-transport stream: only --backend native or gvisor have a choice of agent transport"},
		{"gvisor", native.TransportStream, ""},
		{"native", native.TransportStream, ""},
	} {
		err := checkExecutor(tc.backend, sandbox.BackendOptions{AgentTransport: tc.transport})
		if (tc.want == "" && err != nil) || (tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want))) {
			t.Errorf("--backend %s --agent-transport %s: %v, want %q", tc.backend, tc.transport, err, tc.want)
		}
	}
}
