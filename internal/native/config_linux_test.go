package native

import (
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestConfigRootless: the init's Config says whether the host is
// rootless, so a rootless session's init skips the IPC sysctls it may not
// write (nsinit.LimitSessionIPC) instead of failing at start.
func TestConfigRootless(t *testing.T) {
	for _, rootless := range []bool{false, true} {
		b := &box{spec: &spec.Spec{}, ids: &idMapping{rootless: rootless}, session: true}
		if got := b.config().Rootless; got != rootless {
			t.Errorf("Config.Rootless of a box whose ids are rootless %v = %v, want %v", rootless, got, rootless)
		}
	}
}
