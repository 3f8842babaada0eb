package cgroup

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// These tests run createV1 and createV2 against fake hierarchies: plain directories standing in
// for cgroup mounts. They check where directories go and what is written there, without root;
// what the kernel does with the values is for the live tests.
//
// fakeKernel stands in for the kernel's part: a new cgroup directory gets the interface files
// its parent has, empty. Like the kernel's, the package's writes never create a file, so a
// file a test does not seed is one the "kernel" does not offer.

// fakeKernel makes mkdirCgroup behave like cgroupfs for the test's duration. fail, when not
// nil, may return an errno to fail a mkdir with instead.
func fakeKernel(t *testing.T, fail func(path string) error) {
	t.Helper()
	savedMkdir, savedRmdir := mkdirCgroup, rmdirCgroup
	t.Cleanup(func() { mkdirCgroup, rmdirCgroup = savedMkdir, savedRmdir })
	rmdirCgroup = func(path string) error {
		entries, err := os.ReadDir(path)
		if errors.Is(err, fs.ErrNotExist) {
			return syscall.ENOENT
		} else if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDir() {
				return syscall.EBUSY
			}
			if err := os.Remove(filepath.Join(path, e.Name())); err != nil {
				return err
			}
		}
		return syscall.Rmdir(path)
	}
	mkdirCgroup = func(path string) error {
		if fail != nil {
			if err := fail(path); err != nil {
				return &os.PathError{Op: "mkdir", Path: path, Err: err}
			}
		}
		if err := os.Mkdir(path, 0o755); err != nil {
			return err
		}
		entries, err := os.ReadDir(filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Type().IsRegular() {
				if err := os.WriteFile(filepath.Join(path, e.Name()), nil, 0o644); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

func writeFake(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeV1Files are the interface files a fake v1 hierarchy offers, by controller.
var fakeV1Files = map[string][]string{
	"memory":  {"memory.limit_in_bytes", "memory.swappiness", "memory.oom_control", "memory.max_usage_in_bytes"},
	"pids":    {"pids.max"},
	"cpu":     {"cpu.cfs_period_us", "cpu.cfs_quota_us", "cpu.shares"},
	"cpuacct": {"cpuacct.usage"},
	"freezer": {"freezer.state"},
}

// fakeV1 makes a v1 host with the given hierarchies mounted under a temporary directory, one
// per argument ("cpu,cpuacct" for co-mounted ones); the caller's memory cgroup is nested at
// /own, the others are at the root, like the dev host. With memsw, the memory hierarchy
// accounts swap.
func fakeV1(t *testing.T, memsw bool, hierarchies ...string) (*v1Layout, string) {
	t.Helper()
	fakeKernel(t, nil)
	root := t.TempDir()
	h := host{version: versionV1, self: procCgroup{V1: map[string]string{}}}
	for _, hier := range hierarchies {
		ctls := strings.Split(hier, ",")
		own := "/"
		if ctls[0] == "memory" {
			own = "/own"
		}
		dir := filepath.Join(root, hier, own)
		files := []string{"cgroup.procs"}
		for _, c := range ctls {
			files = append(files, fakeV1Files[c]...)
			h.self.V1[c] = own
		}
		if memsw && ctls[0] == "memory" {
			files = append(files, "memory.memsw.limit_in_bytes")
		}
		for _, f := range files {
			writeFake(t, filepath.Join(dir, f), "")
		}
		h.mounts = append(h.mounts, mount{Root: "/", Point: filepath.Join(root, hier), Controllers: ctls})
	}
	return newV1Layout(h), root
}

// readAll reads the named files under root; "" for an empty (never written) one.
func readAll(t *testing.T, root string, files []string) map[string]string {
	t.Helper()
	got := make(map[string]string)
	for _, f := range files {
		got[f] = readTrim(t, filepath.Join(root, f))
	}
	return got
}

func TestCreateV1Fake(t *testing.T) {
	lay, root := fakeV1(t, true, "memory", "pids", "cpu", "cpuacct", "freezer")
	c, skipped, err := createV1(lay, "1-x", Limits{MemoryBytes: 64 << 20, Pids: 32, CPUs: 1.5})
	if err != nil {
		t.Fatalf("createV1: %v", err)
	}
	if len(skipped) != 0 {
		t.Errorf("skipped = %v, want none", skipped)
	}
	want := map[string]string{
		"memory/own/warden/1-x/memory.limit_in_bytes":       "67108864",
		"memory/own/warden/1-x/memory.memsw.limit_in_bytes": "67108864",
		"memory/own/warden/1-x/memory.swappiness":           "", // swap is capped by memsw
		"memory/own/warden/1-x/memory.oom_control":          "", // warden/ has the OOM killer on
		"pids/warden/1-x/pids.max":                          "32",
		"cpu/warden/1-x/cpu.cfs_period_us":                  "", // a new cgroup's is the default
		"cpu/warden/1-x/cpu.cfs_quota_us":                   "150000",
		"cpu/warden/1-x/cpu.shares":                         "", // 1.5 CPUs weigh the default
	}
	var files []string
	for f := range want {
		files = append(files, f)
	}
	if diff := cmp.Diff(want, readAll(t, root, files)); diff != "" {
		t.Errorf("files written (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(root, "cpuacct/warden/1-x")); err != nil {
		t.Errorf("stats-only hierarchy not created: %v", err)
	}
	if got, want := c.freezer, filepath.Join(root, "freezer/warden/1-x"); got != want {
		t.Errorf("freezer dir = %q, want %q: Freeze needs it", got, want)
	}
	if got, want := c.Path(), filepath.Join(root, "memory/own/warden/1-x"); got != want {
		t.Errorf("Path() = %q, want %q", got, want)
	}
	if len(c.dirs) != 5 {
		t.Errorf("dirs = %v, want memory, pids, cpu, cpuacct, freezer", c.dirs)
	}
}

func TestCreateV1FakeCoMounted(t *testing.T) {
	lay, root := fakeV1(t, true, "memory", "pids", "cpu,cpuacct")
	c, skipped, err := createV1(lay, "1-x", Limits{CPUs: 2})
	if err != nil {
		t.Fatalf("createV1: %v", err)
	}
	// The freezer is not mounted here: skipped, for the doctor to say why
	// sessions cannot pause, and never required.
	if _, ok := skipped[ctlFreezer]; len(skipped) != 1 || !ok {
		t.Errorf("skipped = %v, want the freezer only", skipped)
	}
	if err := c.Freeze(time.Second); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Freeze() without a freezer = %v, want ErrUnsupported", err)
	}
	dir := filepath.Join(root, "cpu,cpuacct/warden/1-x")
	if c.byCtl["cpu"] != dir || c.byCtl["cpuacct"] != dir || c.cpuacct != dir {
		t.Errorf("cpu and cpuacct dirs = %q, %q; want both %q", c.byCtl["cpu"], c.byCtl["cpuacct"], dir)
	}
	want := []v1Dir{
		{filepath.Join(root, "memory/own/warden/1-x"), "memory", filepath.Join(root, "memory/own")},
		{filepath.Join(root, "pids/warden/1-x"), "pids", filepath.Join(root, "pids")},
		{dir, "cpu,cpuacct", filepath.Join(root, "cpu,cpuacct")},
	}
	if diff := cmp.Diff(want, c.dirs, cmp.AllowUnexported(v1Dir{})); diff != "" {
		t.Errorf("dirs (-want +got):\n%s", diff)
	}
	if got := readTrim(t, filepath.Join(dir, "cpu.cfs_quota_us")); got != "200000" {
		t.Errorf("cpu.cfs_quota_us = %q, want 200000", got)
	}
	writeFake(t, filepath.Join(dir, "cpuacct.usage"), "42000\n")
	writeFake(t, filepath.Join(c.memory, "memory.max_usage_in_bytes"), "0\n")
	if s, err := c.Stats(); err != nil || s.CPUTime != 42*time.Microsecond {
		t.Errorf("Stats() = %+v, %v; want 42µs of CPU", s, err)
	}
	// The process goes into the shared directory once.
	if err := c.AddProc(os.Getpid()); err != nil {
		t.Fatalf("AddProc: %v", err)
	}
	if got := readTrim(t, filepath.Join(dir, "cgroup.procs")); got != strconv.Itoa(os.Getpid()) {
		t.Errorf("cgroup.procs = %q, want the pid once", got)
	}
}

func TestCreateV1FakeNoSwapAccounting(t *testing.T) {
	lay, root := fakeV1(t, false, "memory")
	for _, name := range []string{"1-x", "1-y"} {
		if _, _, err := createV1(lay, name, Limits{MemoryBytes: 1 << 30}); err != nil {
			t.Fatalf("createV1: %v", err)
		}
		dir := filepath.Join(root, "memory/own/warden", name)
		if got := readTrim(t, filepath.Join(dir, "memory.swappiness")); got != "0" {
			t.Errorf("%s: memory.swappiness = %q, want 0", name, got)
		}
		if got := readTrim(t, filepath.Join(dir, "memory.limit_in_bytes")); got != "1073741824" {
			t.Errorf("%s: memory.limit_in_bytes = %q, want 1073741824", name, got)
		}
	}
	if !lay.noMemsw.Load() {
		t.Errorf("the missing memsw file was not remembered")
	}
}

// TestCreateV1FakeOOMKillerInherited: where warden/ has the OOM killer disabled, a sandbox with
// a memory limit gets it enabled again (it would hang at its limit otherwise).
func TestCreateV1FakeOOMKillerInherited(t *testing.T) {
	lay, root := fakeV1(t, true, "memory")
	if err := mkdirCgroup(filepath.Join(root, "memory/own/warden")); err != nil {
		t.Fatal(err)
	}
	writeFake(t, filepath.Join(root, "memory/own/warden/memory.oom_control"), "oom_kill_disable 1\nunder_oom 0\noom_kill 0\n")
	if _, _, err := createV1(lay, "1-x", Limits{MemoryBytes: 1 << 20}); err != nil {
		t.Fatalf("createV1: %v", err)
	}
	if got := readTrim(t, filepath.Join(root, "memory/own/warden/1-x/memory.oom_control")); got != "0" {
		t.Errorf("memory.oom_control = %q, want 0", got)
	}
}

func TestCreateV1FakeErrors(t *testing.T) {
	tests := []struct {
		name        string
		controllers []string
		limits      Limits
		wantCtl     string // a *ControllerError for this controller
		wantNone    bool   // ErrNoCgroup
	}{
		{"pids limit without pids", []string{"memory", "cpu"}, Limits{Pids: 10}, "pids", false},
		{"cpus limit without cpu", []string{"memory", "pids"}, Limits{MemoryBytes: 1 << 20, CPUs: 1}, "cpu", false},
		{"memory limit without memory", nil, Limits{MemoryBytes: 1 << 20}, "memory", false},
		{"no limits and no hierarchy", nil, Limits{}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lay, _ := fakeV1(t, true, tt.controllers...)
			c, _, err := createV1(lay, "1-x", tt.limits)
			if err == nil {
				t.Fatalf("createV1 = %v, nil; want an error", c)
			}
			if tt.wantNone {
				if !errors.Is(err, ErrNoCgroup) {
					t.Errorf("createV1 error = %v, want ErrNoCgroup", err)
				}
				return
			}
			var ce *ControllerError
			if !errors.As(err, &ce) || ce.Controller != tt.wantCtl || !errors.Is(err, ErrControllerUnavailable) {
				t.Errorf("createV1 error = %v, want a ControllerError for %s", err, tt.wantCtl)
			}
			if !strings.Contains(err.Error(), "is not mounted on this host") {
				t.Errorf("error %q does not say why", err)
			}
		})
	}
}

// TestCreateV1FakeNotWritable: a hierarchy that refuses the mkdir is skipped when no limit
// needs it, and fails New, undoing the others, when one does.
func TestCreateV1FakeNotWritable(t *testing.T) {
	lay, root := fakeV1(t, true, "memory", "pids", "cpu", "cpuacct")
	fakeKernel(t, func(path string) error {
		if strings.HasPrefix(path, filepath.Join(root, "pids")) {
			return syscall.EACCES
		}
		return nil
	})
	c, skipped, err := createV1(lay, "1-x", Limits{MemoryBytes: 1 << 20})
	if err != nil {
		t.Fatalf("createV1 without a pids limit: %v", err)
	}
	if e := skipped["pids"]; e == nil || !errors.Is(e, fs.ErrPermission) || !strings.Contains(e.Error(), "is not writable at") {
		t.Errorf("skipped[pids] = %v, want not writable", e)
	}
	if _, ok := c.byCtl["pids"]; ok || len(c.dirs) != 3 {
		t.Errorf("dirs = %v, want memory, cpu and cpuacct", c.dirs)
	}

	_, _, err = createV1(lay, "1-y", Limits{MemoryBytes: 1 << 20, Pids: 5})
	var ce *ControllerError
	if !errors.As(err, &ce) || ce.Controller != "pids" || !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("createV1 with a pids limit = %v, want a ControllerError for pids", err)
	}
	t.Logf("error: %v", err)
	for _, d := range []string{"memory/own/warden/1-y", "cpu/warden/1-y", "cpuacct/warden/1-y"} {
		if _, err := os.Stat(filepath.Join(root, d)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left behind: %v", d, err)
		}
	}
}

// TestCreateV1FakeWriteError: a limit file the "kernel" does not offer fails New with an error
// naming the controller and the file, and nothing is left behind.
func TestCreateV1FakeWriteError(t *testing.T) {
	lay, root := fakeV1(t, true, "memory", "pids", "cpu")
	if err := os.Remove(filepath.Join(root, "pids/pids.max")); err != nil {
		t.Fatal(err)
	}
	_, _, err := createV1(lay, "1-x", Limits{MemoryBytes: 1 << 20, Pids: 5})
	var ce *ControllerError
	if !errors.As(err, &ce) || ce.Controller != "pids" || !strings.Contains(err.Error(), "pids.max") {
		t.Fatalf("createV1 = %v, want a ControllerError for pids naming pids.max", err)
	}
	t.Logf("error: %v", err)
	for _, d := range []string{"memory/own/warden/1-x", "pids/warden/1-x", "cpu/warden/1-x"} {
		if _, err := os.Stat(filepath.Join(root, d)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left behind: %v", d, err)
		}
	}
}

// fakeV2Files are the interface files of a fake v2 cgroup with every controller enabled.
var fakeV2Files = []string{"cgroup.procs", "cgroup.subtree_control", "cgroup.kill", "cpu.stat",
	"memory.max", "memory.peak", "memory.events", "pids.max", "cpu.max", "cpu.weight"}

// fakeV2 makes a v2 hierarchy whose top and own cgroup /own offer the given controllers, and a
// layout for a process in /own that may (top) or may not write the top.
func fakeV2(t *testing.T, delegated string, top bool, extra ...string) (*v2Layout, string) {
	t.Helper()
	fakeKernel(t, nil)
	root := t.TempDir()
	for _, d := range []string{root, filepath.Join(root, "own")} {
		for _, f := range append(fakeV2Files, extra...) {
			writeFake(t, filepath.Join(d, f), "")
		}
		writeFake(t, filepath.Join(d, "cgroup.controllers"), delegated+"\n")
	}
	h := host{
		version: versionV2,
		mounts:  []mount{{Root: "/", Point: root, V2: true}},
		self:    procCgroup{V1: map[string]string{}, V2: "/own", HasV2: true},
	}
	return newV2Layout(h, func(string) bool { return top }), root
}

func TestCreateV2Fake(t *testing.T) {
	for _, top := range []bool{false, true} {
		t.Run(map[bool]string{false: "delegated", true: "root"}[top], func(t *testing.T) {
			lay, root := fakeV2(t, "cpuset cpu io memory pids", top)
			base := filepath.Join(root, "own")
			if top {
				base = root
			}
			c, skipped, err := createV2(lay, "1-x", Limits{MemoryBytes: 64 << 20, Pids: 32, CPUs: 1.5})
			if err != nil {
				t.Fatalf("createV2: %v", err)
			}
			if len(skipped) != 0 {
				t.Errorf("skipped = %v, want none", skipped)
			}
			dir := filepath.Join(base, "warden/1-x")
			if c.Path() != dir {
				t.Errorf("Path() = %q, want %q", c.Path(), dir)
			}
			want := map[string]string{"memory.max": "67108864", "pids.max": "32", "cpu.max": "150000 100000", "cpu.weight": ""}
			got := map[string]string{}
			for f := range want {
				got[f] = readTrim(t, filepath.Join(dir, f))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("files written (-want +got):\n%s", diff)
			}
			for _, d := range []string{base, filepath.Join(base, "warden")} {
				if got := readTrim(t, filepath.Join(d, "cgroup.subtree_control")); got != "+memory +pids +cpu" {
					t.Errorf("%s/cgroup.subtree_control = %q, want one write of +memory +pids +cpu", d, got)
				}
			}
			// Without swap accounting (no memory.swap.max) swap is left alone, and the
			// missing file is remembered.
			if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
				t.Errorf("memory.swap.max created")
			}
			if !lay.noSwap.Load() {
				t.Errorf("the missing memory.swap.max was not remembered")
			}
			if lay.moved != "" {
				t.Errorf("moved into %s, want no move", lay.moved)
			}

			// The setup is done once: a second New only makes its directory.
			for _, d := range []string{base, filepath.Join(base, "warden")} {
				writeFake(t, filepath.Join(d, "cgroup.subtree_control"), "untouched")
			}
			if _, _, err := createV2(lay, "1-y", Limits{Pids: 1}); err != nil {
				t.Fatalf("second createV2: %v", err)
			}
			for _, d := range []string{base, filepath.Join(base, "warden")} {
				if got := readTrim(t, filepath.Join(d, "cgroup.subtree_control")); got != "untouched" {
					t.Errorf("second createV2 wrote %q to %s/cgroup.subtree_control", got, d)
				}
			}
		})
	}
}

func TestCreateV2FakeSwapAndEnabled(t *testing.T) {
	lay, root := fakeV2(t, "memory pids cpu", false, "memory.swap.max")
	// Controllers already enabled are not written again.
	writeFake(t, filepath.Join(root, "own/cgroup.subtree_control"), "memory pids cpu\n")
	c, _, err := createV2(lay, "1-x", Limits{MemoryBytes: 1 << 20})
	if err != nil {
		t.Fatalf("createV2: %v", err)
	}
	if got := readTrim(t, filepath.Join(c.dir, "memory.swap.max")); got != "0" {
		t.Errorf("memory.swap.max = %q, want 0", got)
	}
	// Read raw: "left alone" includes the newline a rewrite would drop.
	if got, _ := os.ReadFile(filepath.Join(root, "own/cgroup.subtree_control")); string(got) != "memory pids cpu\n" {
		t.Errorf("own cgroup.subtree_control = %q, want it left alone", got)
	}
}

// TestCreateV2FakeWardenGone: when warden/ disappears after the setup (an operator cleaned
// up), New makes it again, controllers included.
func TestCreateV2FakeWardenGone(t *testing.T) {
	lay, root := fakeV2(t, "memory pids cpu", true)
	c, _, err := createV2(lay, "1-x", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Dir(c.dir)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := createV2(lay, "1-y", Limits{Pids: 3}); err != nil {
		t.Fatalf("createV2 after warden/ vanished: %v", err)
	}
	if got := readTrim(t, filepath.Join(root, "warden/cgroup.subtree_control")); got != "+memory +pids +cpu" {
		t.Errorf("warden/cgroup.subtree_control = %q, want the controllers enabled again", got)
	}
	if got := readTrim(t, filepath.Join(root, "warden/1-y/pids.max")); got != "3" {
		t.Errorf("pids.max = %q, want 3", got)
	}
}

func TestNewV2Layout(t *testing.T) {
	m := mount{Root: "/", Point: "/sys/fs/cgroup", V2: true}
	scope := "/user.slice/user-1000.slice/user@1000.service/app.slice/run-1.scope"
	tests := []struct {
		name     string
		own      string
		writable []string
		wantBase string
		wantTop  bool
	}{
		{"root", "/system.slice/warden.service", []string{"/sys/fs/cgroup"}, "/sys/fs/cgroup", true},
		{"root in the root cgroup", "/", []string{"/sys/fs/cgroup"}, "/sys/fs/cgroup", true},
		{"delegated scope", scope, []string{"/sys/fs/cgroup" + scope}, "/sys/fs/cgroup" + scope, false},
		{"started from the supervisor leaf", scope + "/supervisor", []string{"/sys/fs/cgroup" + scope, "/sys/fs/cgroup" + scope + "/supervisor"},
			"/sys/fs/cgroup" + scope, false},
		{"a leaf named supervisor in someone else's cgroup", "/x/supervisor", nil, "/sys/fs/cgroup/x/supervisor", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := host{version: versionV2, mounts: []mount{m}, self: procCgroup{V2: tt.own, HasV2: true}}
			lay := newV2Layout(h, func(dir string) bool { return slices.Contains(tt.writable, dir) })
			if lay.err != nil || lay.base != tt.wantBase || lay.top != tt.wantTop {
				t.Errorf("layout = base %q, top %v, err %v; want %q, %v", lay.base, lay.top, lay.err, tt.wantBase, tt.wantTop)
			}
		})
	}
}

func TestCreateV2FakeErrors(t *testing.T) {
	tests := []struct {
		name      string
		delegated string
		limits    Limits
		wantCtl   string
		wantIn    string
	}{
		{"memory not delegated", "cpu pids", Limits{MemoryBytes: 1 << 20}, "memory", "is not delegated to"},
		{"cpu not delegated", "memory pids", Limits{CPUs: 2}, "cpu", "not in its cgroup.controllers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lay, _ := fakeV2(t, tt.delegated, false)
			_, _, err := createV2(lay, "1-x", tt.limits)
			var ce *ControllerError
			if !errors.As(err, &ce) || ce.Controller != tt.wantCtl || !strings.Contains(err.Error(), tt.wantIn) ||
				!strings.Contains(err.Error(), "systemd-run --user --scope -p Delegate=yes") {
				t.Errorf("createV2 error = %v, want a ControllerError for %s saying %q and how to fix it", err, tt.wantCtl, tt.wantIn)
			}
		})
	}
	t.Run("optional controllers missing", func(t *testing.T) {
		lay, _ := fakeV2(t, "", false)
		c, skipped, err := createV2(lay, "1-x", Limits{})
		if err != nil {
			t.Fatalf("createV2 without limits: %v", err)
		}
		if c == nil || len(skipped) != 3 {
			t.Errorf("createV2 = %v, skipped %v; want a cgroup and 3 skipped controllers", c, skipped)
		}
	})
	t.Run("no v2 line", func(t *testing.T) {
		h := host{version: versionV2, mounts: []mount{{Root: "/", Point: t.TempDir(), V2: true}}}
		lay := newV2Layout(h, func(string) bool { return true })
		if _, _, err := createV2(lay, "1-x", Limits{}); !errors.Is(err, ErrNoCgroup) {
			t.Errorf("createV2 = %v, want ErrNoCgroup", err)
		}
		if _, _, err := createV2(lay, "1-x", Limits{Pids: 1}); !errors.Is(err, ErrControllerUnavailable) {
			t.Errorf("createV2 = %v, want ErrControllerUnavailable", err)
		}
	})
	t.Run("limit file missing", func(t *testing.T) {
		lay, root := fakeV2(t, "memory pids cpu", true)
		if err := os.Remove(filepath.Join(root, "cpu.max")); err != nil {
			t.Fatal(err)
		}
		_, _, err := createV2(lay, "1-x", Limits{CPUs: 1})
		var ce *ControllerError
		if !errors.As(err, &ce) || ce.Controller != "cpu" || !strings.Contains(err.Error(), "cpu.max") {
			t.Fatalf("createV2 = %v, want a ControllerError for cpu naming cpu.max", err)
		}
		if _, err := os.Stat(filepath.Join(root, "warden/1-x")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("cgroup left behind: %v", err)
		}
	})
}

func TestV2StatsFake(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  Stats
	}{
		{"all there", map[string]string{
			"cpu.stat":      "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n",
			"memory.peak":   "1234\n",
			"memory.events": "low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n",
		}, Stats{CPUTime: 2500 * time.Microsecond, PeakMemoryBytes: 1234, OOMKills: 1}},
		{"no memory controller, kernel before memory.peak", map[string]string{
			"cpu.stat": "usage_usec 7\n",
		}, Stats{CPUTime: 7 * time.Microsecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for f, content := range tt.files {
				writeFake(t, filepath.Join(dir, f), content)
			}
			got, err := (&v2Cgroup{dir: dir}).Stats()
			if err != nil {
				t.Fatalf("Stats: %v", err)
			}
			if got != tt.want {
				t.Errorf("Stats() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestV1StatsFake(t *testing.T) {
	lay, root := fakeV1(t, true, "memory", "cpuacct")
	c, _, err := createV1(lay, "1-x", Limits{})
	if err != nil {
		t.Fatalf("createV1: %v", err)
	}
	writeFake(t, filepath.Join(root, "cpuacct/warden/1-x/cpuacct.usage"), "1500000\n")
	writeFake(t, filepath.Join(root, "memory/own/warden/1-x/memory.max_usage_in_bytes"), "4096\n")
	writeFake(t, filepath.Join(root, "memory/own/warden/1-x/memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
	got, err := c.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if want := (Stats{CPUTime: 1500 * time.Microsecond, PeakMemoryBytes: 4096, OOMKills: 3}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

// TestKillFallbackFake checks the kill loops used where there is no cgroup.kill (v1, and v2
// before Linux 5.14) on a real process listed in a fake cgroup.procs.
func TestKillFallbackFake(t *testing.T) {
	for _, version := range []string{versionV1, versionV2} {
		t.Run(version, func(t *testing.T) {
			cmd := exec.Command("sleep", "30")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			pid := strconv.Itoa(cmd.Process.Pid) + "\n"
			var c Cgroup
			if version == versionV1 {
				lay, root := fakeV1(t, true, "memory", "pids")
				v1, _, err := createV1(lay, "1-x", Limits{})
				if err != nil {
					t.Fatal(err)
				}
				writeFake(t, filepath.Join(root, "memory/own/warden/1-x/cgroup.procs"), pid)
				c = v1
			} else {
				dir := t.TempDir()
				writeFake(t, filepath.Join(dir, "cgroup.procs"), pid)
				c = &v2Cgroup{dir: dir}
			}
			killAndWait(t, c, cmd)
		})
	}
}

func TestHostMode(t *testing.T) {
	v1 := func(p, c string) mount { return mount{Root: "/", Point: p, Controllers: strings.Split(c, ",")} }
	v2 := func(p string) mount { return mount{Root: "/", Point: p, V2: true} }
	named := mount{Root: "/", Point: "/sys/fs/cgroup/systemd"}
	tests := []struct {
		name        string
		mounts      []mount
		wantMode    string
		wantVersion string
	}{
		{"hybrid dev host", []mount{v1("/sys/fs/cgroup/memory", "memory"), named, v2("/sys/fs/cgroup/unified")}, "hybrid", "v1"},
		{"unified", []mount{v2("/sys/fs/cgroup")}, "v2", "v2"},
		{"unified with a stray v1 net_cls", []mount{v2("/sys/fs/cgroup"), v1("/net_cls", "net_cls")}, "v2", "v2"},
		{"legacy", []mount{v1("/sys/fs/cgroup/cpu,cpuacct", "cpu,cpuacct")}, "v1", "v1"},
		{"v2 elsewhere, v1 without Warden's controllers", []mount{v2("/mnt/v2"), v1("/net_cls", "net_cls")}, "hybrid", "v2"},
		{"none", nil, "none", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mode := hostMode(tt.mounts)
			if v := chooseVersion(mode, tt.mounts); mode != tt.wantMode || v != tt.wantVersion {
				t.Errorf("mode, version = %q, %q; want %q, %q", mode, v, tt.wantMode, tt.wantVersion)
			}
		})
	}
}
