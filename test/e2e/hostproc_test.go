package e2e

import (
	"strings"
	"testing"
)

// TestRunUnderHostLimits: a one-shot run starts on hosts that give warden
// little: a hard RLIMIT_NOFILE of 64 (the /etc template's descriptor
// must fit under it), and a /proc mounted subset=pid, as systemd's
// ProcSubset=pid leaves it (the sandbox's view and masks come from its
// own procfs, and every mask is still made).
func TestRunUnderHostLimits(t *testing.T) {
	requireSandbox(t)
	const probe = `echo hi; grep -c ^MemTotal: /proc/meminfo; grep -c ^processor /proc/cpuinfo >/dev/null && echo cpuinfo; ` +
		`ls -A /proc/acpi /proc/irq 2>/dev/null | grep -v : | grep -c . ; wc -c </proc/interrupts`
	tests := []struct {
		name   string
		prefix []string
	}{
		{"hard open-files limit 64", []string{"sh", "-c", `ulimit -n 64 && exec "$@"`, "sh"}},
		{"/proc mounted subset=pid", []string{"unshare", "-m", "--propagation", "private", "sh", "-c",
			`mount -t proc -o subset=pid proc /proc || exit 99; test ! -e /proc/cpuinfo || exit 99; exec "$@"`, "sh"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := wardenAs(t, tt.prefix, "", "run", "--open-files", "32", "--", "sh", "-c", probe)
			if inv.code == 99 {
				t.Skipf("this host cannot set it up: %s", inv.stderr)
			}
			want := "hi\n1\ncpuinfo\n0\n0\n"
			if inv.code != 0 || inv.stdout != want {
				t.Errorf("warden run: exit %d, stdout %q, stderr %q; want exit 0, stdout %q", inv.code, inv.stdout, strings.TrimSpace(inv.stderr), want)
			}
		})
	}
}
