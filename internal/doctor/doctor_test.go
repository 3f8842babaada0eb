package doctor

import (
	"os"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/cgroup"
)

func TestHealthy(t *testing.T) {
	tests := []struct {
		name   string
		checks []Check
		want   bool
	}{
		{"all ok", []Check{{Status: OK}, {Status: OK}}, true},
		{"a warning is healthy", []Check{{Status: OK}, {Status: Warn}}, true},
		{"anything missing is not", []Check{{Status: OK}, {Status: Missing}}, false},
	}
	for _, tt := range tests {
		if got := Healthy(tt.checks); got != tt.want {
			t.Errorf("%s: Healthy() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestCgroupChecks maps a probe report to lines: a missing controller is
// missing with the flag that avoids it, except pids for an ordinary user,
// which RLIMIT_NPROC enforces instead.
func TestCgroupChecks(t *testing.T) {
	rep := cgroup.Report{
		Mode: "v2", Version: "v2", CanCreate: true, Where: "/sys/fs/cgroup/warden",
		Controllers: []cgroup.ControllerReport{
			{Name: "memory", Available: true},
			{Name: "pids", Available: false, Reason: "not delegated"},
			{Name: "cpu", Available: false, Reason: "not delegated"},
		},
	}
	got := map[string]Check{}
	for _, c := range cgroupChecks(rep) {
		got[c.Name] = c
	}
	pidsWant := Missing
	if os.Geteuid() != 0 {
		pidsWant = Warn
	}
	tests := []struct {
		name   string
		status Status
		fix    string
	}{
		{"cgroups", OK, ""},
		{"limit: memory", OK, ""},
		{"limit: pids", pidsWant, map[Status]string{Missing: "a --pids limit will be refused; pass --pids 0 to run without it", Warn: ""}[pidsWant]},
		{"limit: cpu", Missing, "a --cpus limit will be refused; pass --cpus 0 to run without it"},
	}
	for _, tt := range tests {
		c, ok := got[tt.name]
		if !ok || c.Status != tt.status || c.Fix != tt.fix {
			t.Errorf("%s: got %+v, want status %s fix %q", tt.name, c, tt.status, tt.fix)
		}
	}
}

func TestFreezeCheck(t *testing.T) {
	tests := []struct {
		name, mode string
		noFreeze   string
		want       Status
		wantMount  bool
	}{
		{"freezer", "v1", "", OK, false},
		{"no freezer on v1", "v1", "the freezer is not mounted on this host", Warn, true},
		{"no cgroup.freeze on v2", "v2", "this kernel has no cgroup.freeze (Linux 5.2 added it)", Warn, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := freezeCheck(cgroup.Report{Mode: tt.mode, NoFreeze: tt.noFreeze})
			if got.Status != tt.want || (tt.noFreeze != "" && got.Detail != tt.noFreeze) {
				t.Errorf("freezeCheck() = %+v, want status %v saying %q", got, tt.want, tt.noFreeze)
			}
			if mount := strings.Contains(got.Fix, "mount -t cgroup -o freezer"); mount != tt.wantMount {
				t.Errorf("freezeCheck().Fix = %q; want the mount line: %v", got.Fix, tt.wantMount)
			}
		})
	}
}
