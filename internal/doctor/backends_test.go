package doctor

import (
	"slices"
	"testing"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// TestEveryBackendChecked: doctor has a check, with its fix, for every
// registered backend but the default (which liveSandbox runs), and none
// for a backend the registry does not have.
func TestEveryBackendChecked(t *testing.T) {
	names := sandbox.BackendNames()
	for _, name := range names {
		if _, ok := backendChecks[name]; !ok && name != sandbox.DefaultBackend {
			t.Errorf("backend %q is registered but doctor has no check for it", name)
		}
	}
	for name := range backendChecks {
		if !slices.Contains(names, name) || name == sandbox.DefaultBackend {
			t.Errorf("doctor checks backend %q, which is not an optional registered backend (%v)", name, names)
		}
	}
}

// TestGVisorWhere: doctor's gVisor line names the transport it ran over,
// gVisor's default (the stream), and that the other one is not checked.
func TestGVisorWhere(t *testing.T) {
	want := "in gVisor over the stream transport (the servers' default; --agent-transport fd is not checked)"
	if got := gvisorWhere(); got != want {
		t.Errorf("gvisorWhere() = %q, want %q", got, want)
	}
}
