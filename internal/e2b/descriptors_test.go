package e2b

import (
	"testing"

	"github.com/warden-sandbox/warden/internal/egress"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// TestDescriptorsCounted: the descriptors a sandbox may hold in the server
// through E2B's API at its caps, as measured (64 background commands: 255;
// 32 bash contexts: 194), fit in what the server keeps for a sandbox:
// the session's own count and E2B's together.
func TestDescriptorsCounted(t *testing.T) {
	const (
		idleSession  = 24  // the session's own count before interpreters
		measuredCmds = 255 // 64 background commands
		measuredCtxs = 194 // 32 bash contexts
	)
	if maxProcs != 64 || maxCodeContexts != 32 {
		t.Fatalf("caps are %d commands and %d contexts, but the measurements below are of 64 and 32: measure again", maxProcs, maxCodeContexts)
	}
	session := sandbox.DescriptorsPerSandbox - egress.ServerDescriptors
	if got, want := session, idleSession+measuredCtxs; got < want {
		t.Errorf("a session's own descriptors (egress apart) are counted as %d, want at least %d (idle session and 32 contexts)", got, want)
	}
	if got, want := DescriptorsPerSandbox, measuredCmds+maxWatchersPerSandbox; got < want {
		t.Errorf("E2B's descriptors per sandbox are counted as %d, want at least %d (64 commands and a watcher's instance each)", got, want)
	}
}
