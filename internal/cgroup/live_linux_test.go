package cgroup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
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
	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// The live tests create real cgroups where Warden would. They need root and a mounted
// hierarchy; they skip with the reason otherwise, and fail instead under WARDEN_CI=1, where a
// skip would hide a broken CI machine.

// requireCgroups is the RequiresRoot-style guard of the live tests. It returns what New will
// see on this host.
func requireCgroups(t testing.TB) host {
	t.Helper()
	if os.Geteuid() != 0 {
		testhost.SkipOrFail(t, "test needs root to create cgroups")
	}
	s := current()
	h, err := s.h, s.err
	if err != nil {
		testhost.SkipOrFail(t, "cannot read this host's cgroups: "+err.Error())
	}
	if h.version == "" {
		testhost.SkipOrFail(t, "no cgroup hierarchy is mounted")
	}
	return h
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return strings.TrimSpace(string(b))
}

// dirsOf lists every directory a cgroup made, in every hierarchy.
func dirsOf(c Cgroup) []string {
	switch c := c.(type) {
	case *v1Cgroup:
		var out []string
		for _, d := range c.dirs {
			out = append(out, d.path)
		}
		return out
	case *v2Cgroup:
		return []string{c.dir}
	}
	return nil
}

// gated starts a command that waits for a line on stdin before it runs, so the test can put
// it in the cgroup first, as Warden's init waits on a pipe. release lets it go.
func gated(t testing.TB, ctx context.Context, script string) (cmd *exec.Cmd, release func()) {
	t.Helper()
	cmd = exec.CommandContext(ctx, "/bin/sh", "-c", "read x; "+script)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, func() {
		_, _ = io.WriteString(stdin, "go\n")
		_ = stdin.Close()
	}
}

func TestLiveLimitsAddKillDelete(t *testing.T) {
	h := requireCgroups(t)
	l := Limits{MemoryBytes: 64 << 20, Pids: 32, CPUs: 0.5}
	c, err := New(boxname.New(), l)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	dirs := dirsOf(c)
	t.Cleanup(func() { _ = c.Kill(); _ = c.Delete() })

	// Read the limits back from the kernel.
	var want map[string]string
	switch c := c.(type) {
	case *v1Cgroup:
		mem, pids, cpu := c.byCtl[ctlMemory], c.byCtl[ctlPids], c.byCtl[ctlCPU]
		want = map[string]string{
			filepath.Join(mem, "memory.limit_in_bytes"): "67108864",
			filepath.Join(pids, "pids.max"):             "32",
			filepath.Join(cpu, "cpu.cfs_period_us"):     "100000",
			filepath.Join(cpu, "cpu.cfs_quota_us"):      "50000",
			filepath.Join(cpu, "cpu.shares"):            "512",
		}
		if exists(filepath.Join(mem, "memory.kmem.tcp.limit_in_bytes")) {
			want[filepath.Join(mem, "memory.kmem.tcp.limit_in_bytes")] = "67108864"
		}
		if exists(filepath.Join(mem, "memory.memsw.limit_in_bytes")) {
			want[filepath.Join(mem, "memory.memsw.limit_in_bytes")] = "67108864"
		}
		if got := readTrim(t, filepath.Join(mem, "memory.oom_control")); !strings.Contains(got, "oom_kill_disable 0") {
			t.Errorf("memory.oom_control = %q, want the OOM killer enabled", got)
		}
	case *v2Cgroup:
		want = map[string]string{
			filepath.Join(c.dir, "memory.max"): "67108864",
			filepath.Join(c.dir, "pids.max"):   "32",
			filepath.Join(c.dir, "cpu.max"):    "50000 100000",
			filepath.Join(c.dir, "cpu.weight"): "50",
		}
		if _, err := os.Stat(filepath.Join(c.dir, "memory.swap.max")); err == nil {
			want[filepath.Join(c.dir, "memory.swap.max")] = "0"
		}
	}
	for f, w := range want {
		if got := readTrim(t, f); got != w {
			t.Errorf("%s = %q, want %q", f, got, w)
		}
	}

	// A process and its children land in every hierarchy.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, release := gated(t, ctx, "sleep 30 & sleep 30 & wait")
	if err := c.AddProc(cmd.Process.Pid); err != nil {
		t.Fatalf("AddProc: %v", err)
	}
	release()
	for _, d := range dirs {
		ok := waitFor(5*time.Second, func() bool {
			pids, err := readPids(d)
			return err == nil && len(pids) == 3
		})
		pids, _ := readPids(d)
		if !ok || !slices.Contains(pids, cmd.Process.Pid) {
			t.Errorf("%s/cgroup.procs = %v, want the shell %d and its two sleeps", d, pids, cmd.Process.Pid)
		}
	}
	if h.version == versionV1 {
		self := strconv.Itoa(os.Getpid())
		for _, d := range dirs {
			if pids := readTrim(t, filepath.Join(d, "cgroup.procs")); slices.Contains(strings.Fields(pids), self) {
				t.Errorf("the test process itself ended up in %s", d)
			}
		}
	}

	start := time.Now()
	killAndWait(t, c, cmd)
	t.Logf("Kill and wait took %v", time.Since(start))

	s, err := c.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if s.PeakMemoryBytes <= 0 || s.OOMKills != 0 {
		t.Errorf("Stats() = %+v, want some peak memory and no OOM kills", s)
	}
	t.Logf("stats: %+v", s)

	start = time.Now()
	if err := c.Delete(); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	t.Logf("Delete right after the kill took %v", time.Since(start))
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after Delete: %v", d, err)
		}
	}
	if err := c.Delete(); err != nil {
		t.Errorf("second Delete: %v, want nil", err)
	}
	if err := c.AddProc(os.Getpid()); err == nil {
		t.Errorf("AddProc after Delete succeeded")
	}
}

func TestLiveThreadsMove(t *testing.T) {
	requireCgroups(t)
	python := testhost.RequireTool(t, "python3")
	c, err := New(boxname.New(), Limits{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Kill(); _ = c.Delete() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Four threads exist before AddProc; all must move.
	cmd := exec.CommandContext(ctx, python, "-c",
		"import threading,time\n[threading.Thread(target=time.sleep,args=(30,),daemon=True).start() for _ in range(3)]\nprint('ready',flush=True)\ntime.sleep(30)")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 6)
	if _, err := io.ReadFull(out, buf); err != nil {
		t.Fatalf("waiting for python: %v", err)
	}
	if err := c.AddProc(cmd.Process.Pid); err != nil {
		t.Fatalf("AddProc: %v", err)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", cmd.Process.Pid))
	if err != nil || len(tasks) < 4 {
		t.Fatalf("python has %d threads (%v), want 4", len(tasks), err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/cgroup", cmd.Process.Pid, task.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), "/warden/"); n == 0 {
			t.Errorf("thread %s is not in the sandbox's cgroup:\n%s", task.Name(), b)
		}
	}
}

func TestLiveOOM(t *testing.T) {
	requireCgroups(t)
	python := testhost.RequireTool(t, "python3")
	const limit = 64 << 20
	c, err := New(boxname.New(), Limits{MemoryBytes: limit, Pids: 16})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Kill(); _ = c.Delete() })
	// Bounded twice: the OOM killer should end it at once, the context in 60s at most.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// b"x" * n writes every byte, so every page is charged (a bytearray(n) of zeroes may not be).
	cmd, release := gated(t, ctx, "exec "+python+` -c 'b = b"x" * (200 << 20); print(len(b))'`)
	if err := c.AddProc(cmd.Process.Pid); err != nil {
		t.Fatalf("AddProc: %v", err)
	}
	release()
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the allocating process was not stopped by the memory limit within 60s")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("python ended with %v, want SIGKILL from the OOM killer", err)
	}
	s, err := c.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if s.OOMKills == 0 {
		t.Errorf("Stats().OOMKills = 0 after an OOM kill")
	}
	if s.PeakMemoryBytes < limit/2 || s.PeakMemoryBytes > limit {
		t.Errorf("Stats().PeakMemoryBytes = %d, want near the %d limit", s.PeakMemoryBytes, limit)
	}
	t.Logf("stats: %+v", s)
	if err := c.Delete(); err != nil {
		t.Errorf("Delete: %v", err)
	}
}

func TestLiveCPUTime(t *testing.T) {
	requireCgroups(t)
	c, err := New(boxname.New(), Limits{CPUs: 1})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Kill(); _ = c.Delete() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// About 300ms of CPU as a fixed amount of work, which a loaded machine
	// slows down but does not shorten (a wall-time loop would get less CPU).
	cmd, release := gated(t, ctx, `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`)
	if err := c.AddProc(cmd.Process.Pid); err != nil {
		t.Fatalf("AddProc: %v", err)
	}
	release()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("busy loop: %v", err)
	}
	s, err := c.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if s.CPUTime < 100*time.Millisecond || s.CPUTime > 5*time.Second {
		t.Errorf("Stats().CPUTime = %v, want about 300ms", s.CPUTime)
	}
	t.Logf("stats: %+v", s)
}

// TestLiveNameCollision: a name in use is someone's live cgroup; New must refuse it, return a
// nil Cgroup (not a typed nil), and leave the existing one alone.
func TestLiveNameCollision(t *testing.T) {
	requireCgroups(t)
	name := boxname.New()
	first, err := New(name, Limits{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = first.Delete() })
	second, err := New(name, Limits{Pids: 4})
	if err == nil || second != nil {
		t.Fatalf("second New(%q) = %v, %v; want nil and an error", name, second, err)
	}
	t.Logf("error: %v", err)
	for _, d := range dirsOf(first) {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the first cgroup lost %s: %v", d, err)
		}
	}
	if err := first.Delete(); err != nil {
		t.Errorf("Delete: %v", err)
	}
}

// TestLiveRequiredControllerMissing hides the pids hierarchy from New's view of the host: New
// must fail naming it, and must not leave the directories it had made in the others.
func TestLiveRequiredControllerMissing(t *testing.T) {
	h := requireCgroups(t)
	if h.version != versionV1 {
		t.Skip("hides a v1 hierarchy; v2 is covered by TestCreateV2FakeErrors")
	}
	var kept []mount
	for _, m := range h.mounts {
		if !slices.Contains(m.Controllers, "pids") {
			kept = append(kept, m)
		}
	}
	h.mounts = kept
	lay := newV1Layout(h)
	name := boxname.New()
	_, _, err := createV1(lay, name, Limits{MemoryBytes: 64 << 20, Pids: 10})
	var ce *ControllerError
	if !errors.As(err, &ce) || ce.Controller != "pids" {
		t.Fatalf("createV1 = %v, want a ControllerError for pids", err)
	}
	t.Logf("error: %v", err)
	mem := lay.memBase()
	if mem == "" {
		t.Fatal("no memory hierarchy")
	}
	if _, err := os.Stat(filepath.Join(mem, name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("memory cgroup of the failed New left behind: %v", err)
	}
}

func TestLiveRemoveStale(t *testing.T) {
	f := newStaleFixture(t)
	start := time.Now()
	if err := RemoveStale(boxname.Dead); err != nil {
		t.Fatalf("RemoveStale: %v", err)
	}
	t.Logf("RemoveStale took %v", time.Since(start))
	f.check(t, f.stale)
}

// staleFixture is a dead Warden's empty cgroup, another of its cgroups
// still holding a process, one of ours and one not named by Warden.
type staleFixture struct {
	stale, busy, live, notOurs Cgroup
	cmd                        *exec.Cmd
}

func newStaleFixture(t *testing.T) *staleFixture {
	h := requireCgroups(t)
	// A pid that is surely dead: a process that ran and was reaped.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := dead.Process.Pid
	if boxname.Alive(deadPID) {
		t.Skipf("pid %d was reused already", deadPID)
	}
	mk := func(name string) Cgroup {
		t.Helper()
		var c Cgroup
		var err error
		if h.version == versionV1 {
			c, _, err = createV1(current().v1, name, Limits{Pids: 8})
		} else {
			c, _, err = createV2(current().v2, name, Limits{Pids: 8})
		}
		if err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
		t.Cleanup(func() { _ = c.Kill(); _ = c.Delete() })
		return c
	}
	f := &staleFixture{
		stale:   mk(fmt.Sprintf("%d-stale", deadPID)),    // a crashed Warden's leftover
		busy:    mk(fmt.Sprintf("%d-busy", deadPID)),     // owner dead, but a process still in it
		live:    mk(fmt.Sprintf("%d-live", os.Getpid())), // ours
		notOurs: mk(fmt.Sprintf("x%d-other", deadPID)),   // not a name Warden makes
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cmd, release := gated(t, ctx, "exec sleep 30")
	if err := f.busy.AddProc(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	f.cmd = cmd
	return f
}

// check fails t unless exactly the cgroups in gone are gone.
func (f *staleFixture) check(t *testing.T, gone ...Cgroup) {
	t.Helper()
	for _, c := range []Cgroup{f.stale, f.busy, f.live, f.notOurs} {
		for _, d := range dirsOf(c) {
			_, err := os.Stat(d)
			isGone := errors.Is(err, os.ErrNotExist)
			if want := slices.Contains(gone, c); isGone != want {
				t.Errorf("%s: gone = %v, want %v", d, isGone, want)
			}
		}
	}
}

func TestLiveProbe(t *testing.T) {
	h := requireCgroups(t)
	r := Probe()
	t.Logf("probe: %+v", r)
	if !r.CanCreate || r.Version != h.version || r.Where == "" || r.Mode == "none" {
		t.Errorf("Probe() = %+v, want a root user able to create cgroups", r)
	}
	if len(r.Controllers) != 3 {
		t.Fatalf("Probe().Controllers = %+v, want memory, pids, cpu", r.Controllers)
	}
	for i, want := range []string{"memory", "pids", "cpu"} {
		if c := r.Controllers[i]; c.Name != want || !c.Available {
			t.Errorf("Probe().Controllers[%d] = %+v, want %s available", i, c, want)
		}
	}
}

// benchLimits are the cases the benchmarks run: what a sandbox with the CLI's default limits
// and one without limits cost.
var benchLimits = []struct {
	name string
	l    Limits
}{
	{"limits", Limits{MemoryBytes: 256 << 20, Pids: 64, CPUs: 1}},
	{"no-limits", Limits{}},
}

// BenchmarkNewDelete measures creating and removing an empty sandbox cgroup.
func BenchmarkNewDelete(b *testing.B) {
	requireCgroups(b)
	for _, bc := range benchLimits {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				c, err := New(boxname.New(), bc.l)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Delete(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNewAddProcDelete measures what every sandbox start and end costs in cgroup work:
// New, AddProc of a (sleeping) process, and Delete. The one process moves from each
// iteration's cgroup to the next, so that Delete removes a cgroup that has just been emptied,
// as after a sandbox exits. It reports each step's share too.
func BenchmarkNewAddProcDelete(b *testing.B) {
	requireCgroups(b)
	child := exec.Command("sleep", "3600")
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	for _, bc := range benchLimits {
		b.Run(bc.name, func(b *testing.B) {
			var (
				prev       Cgroup
				tn, ta, td time.Duration
				n          int
			)
			for b.Loop() {
				t0 := time.Now()
				c, err := New(boxname.New(), bc.l)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := c.AddProc(child.Process.Pid); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if prev != nil {
					if err := prev.Delete(); err != nil {
						b.Fatal(err)
					}
				}
				t3 := time.Now()
				tn, ta, td, n = tn+t1.Sub(t0), ta+t2.Sub(t1), td+t3.Sub(t2), n+1
				prev = c
			}
			b.ReportMetric(float64(tn.Nanoseconds())/float64(n), "new-ns/op")
			b.ReportMetric(float64(ta.Nanoseconds())/float64(n), "addproc-ns/op")
			b.ReportMetric(float64(td.Nanoseconds())/float64(n), "delete-ns/op")
			// Leave the child to the next case's first cgroup, or to the deferred kill.
			if err := prev.Kill(); err != nil {
				b.Fatal(err)
			}
			_ = child.Process.Kill()
			_ = child.Wait()
			if err := prev.Delete(); err != nil {
				b.Fatal(err)
			}
			child = exec.Command("sleep", "3600")
			if err := child.Start(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestLiveV2Unified runs the v2 code on the unified hierarchy. On a hybrid host that hierarchy
// has no controllers (they are all bound to v1), so this checks what v2 does without them:
// creating (as root, under the hierarchy's top), adding, cgroup.kill, cpu.stat, deleting, and
// refusing a limit it cannot apply.
func TestLiveV2Unified(t *testing.T) {
	h := requireCgroups(t)
	h.version = versionV2
	lay := newV2Layout(h, writable)
	if lay.err != nil {
		testhost.SkipOrFail(t, "no usable cgroup v2 hierarchy: "+lay.err.Error())
	}
	if !lay.top || lay.base != lay.mount.Point {
		t.Errorf("root's v2 layout: base %q (top %v), want the hierarchy's top %q", lay.base, lay.top, lay.mount.Point)
	}
	if _, err := os.Stat(filepath.Join(lay.base, parentDir)); errors.Is(err, os.ErrNotExist) {
		t.Cleanup(func() { _ = os.Remove(filepath.Join(lay.base, parentDir)) })
	}

	_, _, err := createV2(lay, boxname.New(), Limits{MemoryBytes: 64 << 20})
	var ce *ControllerError
	if h.mode != "v2" && (!errors.As(err, &ce) || ce.Controller != "memory") {
		t.Errorf("createV2 with a memory limit on a controller-less v2 = %v, want a ControllerError for memory", err)
	}
	t.Logf("memory limit on this v2 hierarchy: %v", err)

	c, skipped, err := createV2(lay, boxname.New(), Limits{})
	if err != nil {
		t.Fatalf("createV2: %v", err)
	}
	t.Cleanup(func() { _ = c.Kill(); _ = c.Delete() })
	t.Logf("skipped controllers: %v", skipped)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A fixed amount of work (about 0.1 s of CPU here), not a fixed wall
	// time: under load a busy loop of 100 ms gets less CPU than that.
	cmd, release := gated(t, ctx, `i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; sleep 30 & sleep 30 & wait`)
	if err := c.AddProc(cmd.Process.Pid); err != nil {
		t.Fatalf("AddProc: %v", err)
	}
	release()
	if !waitFor(5*time.Second, func() bool { p, _ := readPids(c.dir); return len(p) == 3 }) {
		p, _ := readPids(c.dir)
		t.Fatalf("cgroup.procs = %v, want the shell and two sleeps", p)
	}
	killAndWait(t, c, cmd)
	s, err := c.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if s.CPUTime < 50*time.Millisecond {
		t.Errorf("Stats().CPUTime = %v, want about 100ms", s.CPUTime)
	}
	t.Logf("stats: %+v", s)
	if err := c.Delete(); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := os.Stat(c.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there after Delete: %v", c.dir, err)
	}
}

// helperEnv makes the test binary run TestLiveV2SupervisorHelper instead of being a test.
const helperEnv = "WARDEN_CGROUP_TEST_HELPER"

// TestLiveV2NoInternalProcesses checks, with the kernel, how a rootless Warden in a delegated v2
// cgroup enables controllers, including v2's no-internal-processes rule and the move into
// <own>/supervisor. A hybrid host's v2 hierarchy has none of Warden's controllers, so it stands
// hugetlb in for them where the kernel offers it (enabling it on the v2 root for the test's
// duration), and a fresh cgroup in for the delegated one.
func TestLiveV2NoInternalProcesses(t *testing.T) {
	h := requireCgroups(t)
	probe := newV2Layout(h, writable)
	if probe.err != nil || h.mode != "hybrid" || probe.own != probe.mount.Point {
		t.Skip("needs a hybrid host running in the v2 root, where the test may toggle hugetlb")
	}
	root := probe.mount.Point
	avail, err := readControllers(filepath.Join(root, "cgroup.controllers"))
	if err != nil || !avail["hugetlb"] {
		t.Skip("the v2 hierarchy offers no controller to test with")
	}
	saved := v2Controllers
	v2Controllers = []string{"hugetlb"}
	t.Cleanup(func() { v2Controllers = saved })
	rootCtl := filepath.Join(root, "cgroup.subtree_control")
	if on, _ := readControllers(rootCtl); !on["hugetlb"] {
		if err := writeFile(rootCtl, "+hugetlb"); err != nil {
			t.Skipf("cannot enable hugetlb on the v2 root: %v", err)
		}
		t.Cleanup(func() { _ = writeFile(rootCtl, "-hugetlb") })
	}

	// A stand-in for the delegated cgroup Warden runs in.
	ownName := "warden-test-" + boxname.New()
	own := filepath.Join(root, ownName)
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	reset := func() {
		for _, d := range []string{filepath.Join(own, parentDir), filepath.Join(own, leafDir)} {
			_ = writeFile(filepath.Join(d, "cgroup.subtree_control"), "-hugetlb")
			_ = rmdirRetry(d)
		}
		_ = writeFile(filepath.Join(own, "cgroup.subtree_control"), "-hugetlb")
	}
	t.Cleanup(func() {
		reset()
		_ = rmdirRetry(own)
	})
	// The test process itself must never be moved, so in-process it poses as a Warden that an
	// earlier one already moved into <own>/supervisor: the layout's base is then own, and
	// Warden is not in it.
	hs := h
	hs.version = versionV2
	hs.self.V2 = "/" + ownName + "/" + leafDir
	// As a user may: write the delegated cgroup, not the hierarchy's top.
	rootless := func(dir string) bool { return dir != root }

	// Without processes in the own cgroup, the controller reaches the sandbox's cgroup.
	lay := newV2Layout(hs, rootless)
	if lay.base != own || lay.top {
		t.Fatalf("rootless layout: base %q (top %v), want %q", lay.base, lay.top, own)
	}
	c, skipped, err := createV2(lay, boxname.New(), Limits{})
	if err != nil || len(skipped) != 0 {
		t.Fatalf("createV2 = %v, skipped %v; want hugetlb enabled", err, skipped)
	}
	if ctl := readTrim(t, filepath.Join(c.dir, "cgroup.controllers")); ctl != "hugetlb" {
		t.Errorf("sandbox cgroup.controllers = %q, want hugetlb", ctl)
	}
	if err := c.Delete(); err != nil {
		t.Fatal(err)
	}
	reset()

	// With a process in it that is not Warden, enabling fails with EBUSY, reported so.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	other, release := gated(t, ctx, "exec sleep 30")
	if err := writeFile(filepath.Join(own, "cgroup.procs"), strconv.Itoa(other.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	busy := "which has processes (pids " + strconv.Itoa(other.Process.Pid) + ")"
	lay = newV2Layout(hs, rootless)
	c, skipped, err = createV2(lay, boxname.New(), Limits{})
	if err != nil {
		t.Fatalf("createV2 without limits: %v", err)
	}
	if err := c.Delete(); err != nil {
		t.Fatal(err)
	}
	e := skipped["hugetlb"]
	if e == nil || !errors.Is(e, syscall.EBUSY) || !strings.Contains(e.Error(), busy) ||
		!strings.Contains(e.Error(), "systemd-run --user --scope -p Delegate=yes") || lay.moved != "" {
		t.Fatalf("skipped[hugetlb] = %v, moved %q; want EBUSY explained, with the fix, and no move", e, lay.moved)
	}
	t.Logf("reported: %v", e)

	// With Warden itself in it too (a helper process standing in), Warden moves into
	// <own>/supervisor, but the other process still keeps the controller from its children.
	out := runSupervisorHelper(t, ctx, own)
	if out["moved"] != filepath.Join(own, leafDir) || !strings.Contains(out["skip hugetlb"], busy) {
		t.Errorf("helper beside another process: %v; want it moved and EBUSY explained", out)
	}
	t.Logf("reported: %s", out["skip hugetlb"])
	release()
	_ = other.Process.Kill()
	_ = other.Wait()
	if !waitFor(5*time.Second, func() bool { p, err := readPids(own); return err == nil && len(p) == 0 }) {
		t.Fatalf("%s did not empty", own)
	}
	reset()

	// With Warden alone in it, Warden moves into <own>/supervisor and then enables the
	// controller.
	out = runSupervisorHelper(t, ctx, own)
	want := map[string]string{
		"moved":       filepath.Join(own, leafDir),
		"controllers": "hugetlb",
		"skipped":     "0",
		"cgroup":      "0::/" + ownName + "/" + leafDir,
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("helper alone in the own cgroup (-want +got):\n%s", diff)
	}
}

// runSupervisorHelper runs TestLiveV2SupervisorHelper in a child process placed in own, and
// returns what it reported.
func runSupervisorHelper(t *testing.T, ctx context.Context, own string) map[string]string {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLiveV2SupervisorHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(own, "cgroup.procs"), strconv.Itoa(cmd.Process.Pid)); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal(err)
	}
	_, _ = io.WriteString(stdin, "go\n")
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v\n%s", err, stdout.String())
	}
	out := make(map[string]string)
	for _, line := range strings.Split(stdout.String(), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.Contains(k, " ") {
			out[k] = v
		} else if k, v, ok := strings.Cut(line, ": "); ok && strings.HasPrefix(k, "skip ") {
			out[k] = v
		}
	}
	if out["error"] != "" {
		t.Fatalf("helper: %s", out["error"])
	}
	return out
}

// TestLiveV2SupervisorHelper is run by TestLiveV2NoInternalProcesses as a child process, once
// the parent has put it in a cgroup of its own: as a rootless Warden would, it creates a
// sandbox's cgroup with hugetlb standing in for Warden's controllers, and reports.
func TestLiveV2SupervisorHelper(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("run by TestLiveV2NoInternalProcesses")
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	v2Controllers = []string{"hugetlb"}
	h, err := readHost()
	if err != nil {
		fmt.Printf("error=%v\n", err)
		return
	}
	h.version = versionV2
	m, _ := findV2Mount(h.mounts, h.self.V2)
	lay := newV2Layout(h, func(dir string) bool { return dir != m.Point })
	c, skipped, err := createV2(lay, boxname.New(), Limits{})
	if err != nil {
		fmt.Printf("error=%v\n", err)
		return
	}
	defer func() {
		if err := c.Delete(); err != nil {
			fmt.Printf("deleting the probe cgroup: %v\n", err)
		}
	}()
	ctl, _ := os.ReadFile(filepath.Join(c.dir, "cgroup.controllers"))
	self, _ := os.ReadFile("/proc/self/cgroup")
	var v2Line string
	for _, l := range strings.Split(string(self), "\n") {
		if strings.HasPrefix(l, "0::") {
			v2Line = l
		}
	}
	fmt.Printf("moved=%s\ncontrollers=%s\nskipped=%d\ncgroup=%s\n", lay.moved, strings.TrimSpace(string(ctl)), len(skipped), v2Line)
	for ctl, e := range skipped {
		fmt.Printf("skip %s: %v\n", ctl, e)
	}
}

// killAndWait kills everything in c and checks that cmd, the shell the test
// started in it, died of SIGKILL.
func killAndWait(t *testing.T, c Cgroup, cmd *exec.Cmd) {
	t.Helper()
	if err := c.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("shell ended with %v, want SIGKILL", err)
	}
}
