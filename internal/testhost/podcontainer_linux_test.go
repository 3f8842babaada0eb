package testhost

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNewMountNS runs PodContainerScript's guard alone (never the
// mounts after it): in the test's own mount namespace, or without the
// caller's named, it refuses; in a new one it lets the script go on.
func TestNewMountNS(t *testing.T) {
	RequireRoot(t)
	RequireTool(t, "unshare")
	env := append(os.Environ(), PodContainerEnv(t)...)
	script := newMountNS + "; echo went on"
	for _, tc := range []struct {
		name string
		argv []string
		env  []string
		want string
	}{
		{"the test's namespace", []string{"sh", "-c", script}, env, "not in a mount namespace of its own"},
		{"no caller's namespace named", []string{"unshare", "--mount", "sh", "-c", script}, os.Environ(), "not in a mount namespace of its own"},
		{"a new namespace", []string{"unshare", "--mount", "sh", "-c", script}, env, "went on"},
	} {
		cmd := exec.Command(tc.argv[0], tc.argv[1:]...)
		cmd.Env = tc.env
		out, _ := cmd.CombinedOutput()
		if got := string(out); !strings.Contains(got, tc.want) || (tc.want != "went on" && strings.Contains(got, "went on")) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
