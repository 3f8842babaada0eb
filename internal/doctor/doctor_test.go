package doctor

import (
	"os"
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
		name     string
		noFreeze string
		want     Status
	}{
		{"freezer", "", OK},
		{"no freezer", "the freezer is not mounted on this host", Warn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := freezeCheck(cgroup.Report{NoFreeze: tt.noFreeze})
			if got.Status != tt.want || (tt.noFreeze != "" && got.Detail != tt.noFreeze) {
				t.Errorf("freezeCheck() = %+v, want status %v saying %q", got, tt.want, tt.noFreeze)
			}
		})
	}
}
