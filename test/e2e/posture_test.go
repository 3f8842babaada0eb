package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// postureCases are, per backend, what a sandbox of that backend must not
// learn about the host or reach of Warden's agent, beyond the common
// conformance cases: each backend hides what its technology lets it
// (docs/architecture.md says what each cannot).
func postureCases() map[string][]conformanceCase {
	bin := filepath.Dir(wardenBin)
	return map[string][]conformanceCase{
		"docker": {
			// The root's overlay mount names Docker's layer directories and
			// cannot be hidden; every other mount names no host path.
			{name: "mountinfo names no host path", script: "awk '$5 != \"/\"' /proc/self/mountinfo | grep -E '/var/lib/docker|/run/warden|/docker/|" + bin + "'; echo done",
				check: wantExit(0, "done")},
			{name: "own cgroup namespace", script: "grep -v ':/$' /proc/self/cgroup; echo done", check: wantExit(0, "done")},
			{name: "hostname file is Warden's", script: "cat /etc/hostname", check: wantExit(0, "sandbox")},
		},
	}
}

// TestBackendPosture runs each backend's posture cases on it.
func TestBackendPosture(t *testing.T) {
	cases := postureCases()
	for _, b := range conformanceBackends(t) {
		if len(cases[b]) == 0 {
			continue
		}
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			for _, c := range cases[b] {
				t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
					c.check(t, sh(t, c.script, append([]string{"--backend", b}, c.flags...)...))
				})
			}
		})
	}
}
