package cgroup

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/warden-sandbox/warden/internal/boxname"
)

func TestOwnDir(t *testing.T) {
	tests := []struct {
		name     string
		m        mount
		procPath string
		want     string
		wantErr  bool
	}{
		{"host root", mount{Root: "/", Point: "/sys/fs/cgroup/cpu"}, "/", "/sys/fs/cgroup/cpu", false},
		{"nested memory cgroup", mount{Root: "/", Point: "/sys/fs/cgroup/memory"}, "/process_api/d3ad",
			"/sys/fs/cgroup/memory/process_api/d3ad", false},
		{"v2 user session", mount{Root: "/", Point: "/sys/fs/cgroup", V2: true},
			"/user.slice/user-1000.slice/user@1000.service/app.slice/w.scope",
			"/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/w.scope", false},
		{"container bind mount shows its own cgroup", mount{Root: "/docker/abc", Point: "/sys/fs/cgroup/memory"},
			"/docker/abc", "/sys/fs/cgroup/memory", false},
		{"inside the container's subtree", mount{Root: "/docker/abc", Point: "/sys/fs/cgroup/memory"},
			"/docker/abc/inner", "/sys/fs/cgroup/memory/inner", false},
		{"outside the mount", mount{Root: "/docker/abc", Point: "/sys/fs/cgroup/memory"}, "/docker/other", "", true},
		{"prefix is not containment", mount{Root: "/docker/abc", Point: "/sys/fs/cgroup/memory"}, "/docker/abcdef", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ownDir(tt.m, tt.procPath)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ownDir = %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestFindMounts(t *testing.T) {
	mounts := []mount{
		{Root: "/other", Point: "/elsewhere/memory", Controllers: []string{"memory"}},
		{Root: "/", Point: "/sys/fs/cgroup/memory", Controllers: []string{"memory"}},
		{Root: "/", Point: "/sys/fs/cgroup/cpu,cpuacct", Controllers: []string{"cpu", "cpuacct"}},
		{Root: "/x", Point: "/mnt/v2", V2: true},
		{Root: "/", Point: "/sys/fs/cgroup/unified", V2: true},
	}
	tests := []struct {
		name      string
		ctl       string
		procPath  string
		wantPoint string
		wantOK    bool
	}{
		{"prefers the mount containing the process", "memory", "/a", "/sys/fs/cgroup/memory", true},
		{"first mount when it contains the process", "memory", "/other/a", "/elsewhere/memory", true},
		{"co-mounted", "cpuacct", "/", "/sys/fs/cgroup/cpu,cpuacct", true},
		{"not mounted", "pids", "/", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := findV1Mount(mounts, tt.ctl, tt.procPath)
			if ok != tt.wantOK || m.Point != tt.wantPoint {
				t.Errorf("findV1Mount(%q, %q) = %q, %v; want %q, %v", tt.ctl, tt.procPath, m.Point, ok, tt.wantPoint, tt.wantOK)
			}
		})
	}
	if m, ok := findV2Mount(mounts, "/"); !ok || m.Point != "/sys/fs/cgroup/unified" {
		t.Errorf("findV2Mount(/) = %q, %v; want /sys/fs/cgroup/unified", m.Point, ok)
	}
	if m, ok := findV2Mount(mounts, "/x/y"); !ok || m.Point != "/mnt/v2" {
		t.Errorf("findV2Mount(/x/y) = %q, %v; want /mnt/v2", m.Point, ok)
	}
	if _, ok := findV2Mount(mounts[:3], "/"); ok {
		t.Errorf("findV2Mount without a cgroup2 mount found one")
	}
}

func TestCFSQuota(t *testing.T) {
	tests := []struct {
		cpus    float64
		want    int64
		wantErr bool
	}{
		{0, 0, false},
		{1, 100000, false},
		{1.5, 150000, false},
		{0.01, 1000, false},
		{0.333333, 33333, false},
		{0.005, 0, true},
		{-1, 0, true},
		{math.NaN(), 0, true},
		{math.Inf(1), 0, true},
		{1e9, 0, true},
	}
	for _, tt := range tests {
		got, err := cfsQuota(tt.cpus)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("cfsQuota(%v) = %d, %v; want %d, error %v", tt.cpus, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestValidateLimits(t *testing.T) {
	tests := []struct {
		l       Limits
		wantErr string
	}{
		{Limits{}, ""},
		{Limits{MemoryBytes: 64 << 20, Pids: 64, CPUs: 1.5}, ""},
		{Limits{MemoryBytes: -1}, "memory limit -1 is negative"},
		{Limits{Pids: -5}, "pids limit -5 is negative"},
		{Limits{CPUs: 0.001}, "cpus limit 0.001 is below the kernel's minimum of 0.01"},
	}
	for _, tt := range tests {
		err := validateLimits(tt.l)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.wantErr {
			t.Errorf("validateLimits(%+v) = %q, want %q", tt.l, got, tt.wantErr)
		}
	}
}

func TestRequired(t *testing.T) {
	tests := []struct {
		l    Limits
		want map[string]bool
	}{
		{Limits{}, map[string]bool{}},
		{Limits{MemoryBytes: 1}, map[string]bool{"memory": true}},
		{Limits{Pids: 1, CPUs: 0.5}, map[string]bool{"pids": true, "cpu": true}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, required(tt.l)); diff != "" {
			t.Errorf("required(%+v) mismatch (-want +got):\n%s", tt.l, diff)
		}
	}
}

func TestValidateName(t *testing.T) {
	const pid = 4242
	tests := []struct {
		name    string
		wantErr bool
	}{
		{"4242-0123456789abcdef", false},
		{"4242-x", false},
		{"", true},
		{".", true},
		{"..", true},
		{"4242-../x", true},
		{"4242-a/b", true},
		{"4242-a..b", true},
		{"4242-a\x00", true},
		{"4243-x", true},   // another owner's: RemoveStale would misjudge it
		{"4242", true},     // no suffix
		{"04242-x", true},  // not how a pid is written
		{"abc-4242", true}, // not ours
		{"4242-" + strings.Repeat("a", 300), true},
	}
	for _, tt := range tests {
		if err := validateName(tt.name, pid); (err != nil) != tt.wantErr {
			t.Errorf("validateName(%q) = %v, want error %v", tt.name, err, tt.wantErr)
		}
	}
}

// TestBoxNameAccepted: names from boxname.New are what New accepts.
func TestBoxNameAccepted(t *testing.T) {
	a, b := boxname.New(), boxname.New()
	if a == b {
		t.Errorf("boxname.New returned %q twice", a)
	}
	if err := validateName(a, os.Getpid()); err != nil {
		t.Errorf("boxname.New() = %q, which New would reject: %v", a, err)
	}
}

func TestControllerError(t *testing.T) {
	tests := []struct {
		name string
		err  *ControllerError
		want string
	}{
		{
			"not writable",
			&ControllerError{Controller: "memory", Problem: "is not writable at /sys/fs/cgroup/memory/warden/1-a", Fix: fixDelegate, Err: fs.ErrPermission},
			"memory limit needs the memory cgroup controller, which is not writable at /sys/fs/cgroup/memory/warden/1-a: permission denied; run as root or delegate a cgroup (see warden doctor)",
		},
		{
			"not mounted, cpus named as the flag is",
			&ControllerError{Controller: "cpu", Problem: "is not mounted on this host", Fix: fixMount},
			"cpus limit needs the cpu cgroup controller, which is not mounted on this host; mount the controller or use a kernel that has it (see warden doctor)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q\nwant      %q", got, tt.want)
			}
			if !errors.Is(tt.err, ErrControllerUnavailable) {
				t.Errorf("errors.Is(err, ErrControllerUnavailable) = false")
			}
			if tt.err.Err != nil && !errors.Is(tt.err, tt.err.Err) {
				t.Errorf("errors.Is(err, cause) = false")
			}
		})
	}
}

func TestCPUWeight(t *testing.T) {
	tests := []struct {
		cpus     float64
		unit, lo int64
		want     int64
	}{
		{0, 1024, 2, 0},
		{-1, 1024, 2, 0},
		{math.NaN(), 1024, 2, 0},
		{1, 1024, 2, 0}, // the default: nothing to write
		{0.1, 1024, 2, 102},
		{0.5, 1024, 2, 512},
		{0.001, 1024, 2, 2},
		{1.5, 1024, 2, 0}, // never above the default
		{1024, 1024, 2, 0},
		{0.1, 100, 1, 10},
		{0.001, 100, 1, 1},
		{1, 100, 1, 0},
		{200, 100, 1, 0},
	}
	for _, tt := range tests {
		if got := cpuWeight(tt.cpus, tt.unit, tt.lo); got != tt.want {
			t.Errorf("cpuWeight(%v, %d, %d) = %d, want %d", tt.cpus, tt.unit, tt.lo, got, tt.want)
		}
	}
}
