package rootfs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/plan"
)

// TestPlan: a host root's plan encodes for warden-exec, holds the /etc
// template from its first op to its bind, ends pivoted, and words each
// op's failure as the step that made the call did.
func TestPlan(t *testing.T) {
	o := Options{DiskBytes: 1 << 20, Inodes: 100, WorkspaceFD: -1, UID: 1000, GID: 1000,
		Etc: EtcTemplate{Dir: "/etc-template", Binds: []string{"ssl/certs"}}, View: View{CPUs: 1}}
	p, err := Plan("/tmp", o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Encode(p); err != nil {
		t.Fatalf("Encode(Plan): %v", err)
	}
	first, last := p.Ops[0], p.Ops[len(p.Ops)-1]
	if first.Code != plan.OpenFD || first.Strs[0] != "/etc-template" || first.Context != `opening the /etc template "/etc-template"` {
		t.Errorf("first op = %+v, want the /etc template opened", first)
	}
	if last.Code != plan.MountSetattr || last.Strs[0] != "/" {
		t.Errorf("last op = %+v, want / restricted", last)
	}
	wantCtx := map[string]string{
		"/tmp/usr":           `binding /usr: mounting "/usr" on "/tmp/usr"`,
		"/tmp/etc/ssl/certs": `building /etc: mounting "/etc/ssl/certs" on "/tmp/etc/ssl/certs"`,
		"/tmp/dev/null":      `building /dev: /dev/null: mounting "/dev/null" on "/tmp/dev/null"`,
		"/tmp/.scratch":      `building writable dirs: mounting "tmpfs" on "/tmp/.scratch"`,
	}
	for _, op := range p.Ops {
		if op.Code != plan.Mount {
			continue
		}
		if want, ok := wantCtx[op.Strs[1]]; ok {
			if op.Context != want {
				t.Errorf("context of the mount on %s = %q, want %q", op.Strs[1], op.Context, want)
			}
			delete(wantCtx, op.Strs[1])
		}
	}
	for dst := range wantCtx {
		t.Errorf("no mount on %s in the plan", dst)
	}
	for _, op := range p.Ops {
		if op.Context == "" || strings.HasPrefix(op.Context, ":") {
			t.Errorf("op %s %v has context %q", op.Code, op.Strs, op.Context)
		}
	}
}

// TestPlanRefuses: a root Plan cannot make says why.
func TestPlanRefuses(t *testing.T) {
	if _, err := Plan("/tmp", Options{}); err == nil || !strings.Contains(err.Error(), "no /etc template") {
		t.Errorf("Plan without an /etc template: %v", err)
	}
	if _, err := Plan("/tmp", Options{Image: &ImageRoot{FD: 6}}); err == nil {
		t.Errorf("Plan of a template's root: no error")
	}
}

// TestPlanMasksEveryEntry: the plan masks every MaskedProcPaths entry,
// by its fixed kind, whatever the /proc warden sees shows (subset=pid
// shows none of them), and an entry the kernel lacks is no failure.
func TestPlanMasksEveryEntry(t *testing.T) {
	p, err := Plan("/r", Options{WorkspaceFD: -1, Etc: EtcTemplate{Dir: "/etc-template"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]plan.Op{}
	for _, op := range p.Ops {
		if op.Code == plan.Mount && strings.HasPrefix(op.Strs[1], "/r/proc/") {
			got[strings.TrimPrefix(op.Strs[1], "/r/proc/")] = op
		}
	}
	for _, name := range MaskedProcPaths {
		op, ok := got[name]
		wantSrc := "/r/dev/null"
		if maskedProcDirs[name] {
			wantSrc = "tmpfs"
		}
		if !ok || op.Strs[0] != wantSrc || op.Ints[1] != uint64(unix.ENOENT) {
			t.Errorf("mask of /proc/%s = %+v (planned %v), want %s over it with ENOENT tolerated", name, op, ok, wantSrc)
		}
	}
}

// TestMaskKinds: each masked entry's fixed kind is the kind this host's
// kernel gives it, and every directory named is masked.
func TestMaskKinds(t *testing.T) {
	for name := range maskedProcDirs {
		if !slices.Contains(MaskedProcPaths, name) {
			t.Errorf("maskedProcDirs names %q, which MaskedProcPaths lacks", name)
		}
	}
	for _, name := range MaskedProcPaths {
		fi, err := os.Stat(filepath.Join("/proc", name))
		if err != nil {
			continue
		}
		if fi.IsDir() != maskedProcDirs[name] {
			t.Errorf("/proc/%s: directory %v here, masked as directory %v", name, fi.IsDir(), maskedProcDirs[name])
		}
	}
}

// TestPlanEtcFDIsLow: a plan holds the /etc template at EtcFD, which a
// low hard RLIMIT_NOFILE admits, and closes it after binding it.
func TestPlanEtcFDIsLow(t *testing.T) {
	p, err := Plan("/r", Options{WorkspaceFD: -1, Etc: EtcTemplate{Dir: "/etc-template"}})
	if err != nil {
		t.Fatal(err)
	}
	var opened, closed bool
	for _, op := range p.Ops {
		switch op.Code {
		case plan.OpenFD:
			opened = op.Ints[1] == EtcFD
		case plan.Close:
			closed = opened && op.Ints[0] == EtcFD
		}
	}
	if !opened || !closed || EtcFD > 16 {
		t.Errorf("EtcFD %d: opened %v, closed %v; want a descriptor at most 16, opened and closed", EtcFD, opened, closed)
	}
}

// TestApplyWordsChecks: a failed check reads as the step's own text did
// before the root was planned: the missing directory alone, the wrong
// node with its mode and device.
func TestApplyWordsChecks(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "null")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	pl := &planner{p: &plan.Plan{}, what: "building writable dirs"}
	pl.add(plan.CheckDir, nil, []string{filepath.Join(dir, "tmp")}, `the host's scratch has no directory "tmp"`)
	pl2 := &planner{p: &plan.Plan{}, what: "building /dev"}
	pl2.add(plan.CheckChrdev, []uint64{1, 3}, []string{file}, "/dev/null is not the character device 1:3")
	tests := []struct {
		ops  []plan.Op
		want string
	}{
		{pl.p.Ops, `building writable dirs: the host's scratch has no directory "tmp"`},
		{pl2.p.Ops, "building /dev: /dev/null is not the character device 1:3 (mode 100644, device 0:0)"},
	}
	for _, tt := range tests {
		if err := apply(tt.ops); err == nil || err.Error() != tt.want {
			t.Errorf("apply(%s) = %v, want %q", tt.ops[0].Code, err, tt.want)
		}
	}
}

// TestPlanHomeFiles: a home file is written into the scratch's home after
// its parents (an existing one no failure), and bad home files are refused.
func TestPlanHomeFiles(t *testing.T) {
	o := Options{WorkspaceFD: -1, Etc: EtcTemplate{Dir: "/etc-template"},
		HomeFiles: []HomeFile{{Path: ".cache/matplotlib/fontlist-v330.json", Data: []byte("{}")}}}
	p, err := Plan("/r", o)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, op := range p.Ops {
		switch {
		case op.Code == plan.Mkdir && strings.HasPrefix(op.Strs[0], "/r/.scratch/home/"):
			got = append(got, "mkdir "+op.Strs[0])
			if op.Ints[1] != uint64(unix.EEXIST) {
				t.Errorf("mkdir %s fails on EEXIST", op.Strs[0])
			}
		case op.Code == plan.WriteFile && strings.HasPrefix(op.Strs[0], "/r/.scratch/home/"):
			got = append(got, "write "+op.Strs[0]+" "+op.Strs[1])
		}
	}
	want := []string{"mkdir /r/.scratch/home/.cache", "mkdir /r/.scratch/home/.cache/matplotlib",
		"write /r/.scratch/home/.cache/matplotlib/fontlist-v330.json {}"}
	if !slices.Equal(got, want) {
		t.Errorf("home ops = %q, want %q", got, want)
	}
	o.HostScratch, o.WorkspaceFD = true, 4
	if p, err = Plan("/r", o); err != nil {
		t.Fatal(err)
	}
	for _, op := range p.Ops {
		if op.Code == plan.WriteFile && strings.Contains(op.Strs[0], "fontlist") {
			t.Errorf("a host scratch got home file %s", op.Strs[0])
		}
	}
	for _, bad := range []HomeFile{{Path: "../etc/passwd"}, {Path: "/abs"}, {Path: "a/./b"}, {Path: ""}, {Path: "."}, {Path: "a\x00b"}, {Path: "big", Data: make([]byte, MaxHomeFiles+1)}} {
		o := Options{WorkspaceFD: -1, Etc: EtcTemplate{Dir: "/etc-template"}, HomeFiles: []HomeFile{bad}}
		if _, err := Plan("/r", o); err == nil || !strings.Contains(err.Error(), "home file") {
			t.Errorf("Plan with home file %q (%d bytes): err = %v, want a refusal", bad.Path, len(bad.Data), err)
		}
	}
}
