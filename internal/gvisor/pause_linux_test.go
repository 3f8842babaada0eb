package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// pauseFor is how long the pause tests keep a box paused: far longer
// than any gap a spinning process sees between its turns on a running
// box.
const pauseFor = 1500 * time.Millisecond

// gapProbe is a Python process that spins and writes to /tmp/gap the
// longest gap it saw between two of its turns: a box that really stopped
// shows one as long as the pause.
const gapProbe = `
import os, time
gap, last = 0.0, time.monotonic()
while True:
    now = time.monotonic()
    if now - last > gap:
        gap = now - last
        with open("/tmp/gap.new", "w") as f:
            f.write(repr(gap))
        os.rename("/tmp/gap.new", "/tmp/gap")
    last = now
`

// spawnQuiet starts script under sh in sess as a process of the session
// with the box's /dev/null for its stdio.
func spawnQuiet(t *testing.T, sess *agent.Session, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := sess.Spawn(ctx, interp.Command{
		Argv:  []string{"sh", "-c", `exec sh -c "$0" </dev/null >/dev/null 2>&1`, script},
		Env:   sess.Env(),
		Files: devNulls(t),
	}); err != nil {
		t.Fatalf("starting %q: %v", script, err)
	}
}

// freezeTries bounds requireFrozen's pauses of one box.
const freezeTries = 3

// requireFrozen checks that r's box of sess, just paused, is frozen,
// skipping (failing under WARDEN_CI=1) where the host cannot freeze it.
// The box must run on freezablePlatform. A freeze that stalled (see
// freezeTimeout: now and then under ptrace) pauses the box through its
// sentry instead, as it should; since it is the freezer these tests are
// about, the box is then resumed and paused again, freezeTries times in
// all.
func requireFrozen(t *testing.T, r *Runtime, sess *agent.Session) {
	t.Helper()
	b := r.boxOf(sess)
	var frozen, runscPaused, noFreezer bool
	for try := 1; ; try++ {
		b.pz.mu.Lock()
		frozen, runscPaused, noFreezer = b.pz.frozen.Load(), b.pz.runscPaused.Load(), b.pz.noFreezer
		sentryPaused := b.pz.sentryPaused.Load()
		b.pz.mu.Unlock()
		if frozen || runscPaused || noFreezer || !sentryPaused || try == freezeTries {
			break
		}
		t.Logf("pause %d: the freeze stalled and the box paused through its sentry; resuming it to pause again", try)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := sess.Resume(ctx)
		if err == nil {
			err = sess.Pause(ctx)
		}
		cancel()
		if err != nil {
			t.Fatalf("pausing again after a stalled freeze: %v", err)
		}
	}
	if noFreezer {
		testhost.SkipOrFail(t, "this host cannot freeze a gVisor box's cgroup (see the debug log); it pauses with runsc pause")
	}
	if !frozen || runscPaused {
		t.Fatalf("paused box: frozen %v, runsc-paused %v; want frozen only", frozen, runscPaused)
	}
	state, err := os.ReadFile(filepath.Join(b.pz.fz.Path(), "freezer.state"))
	if err == nil && strings.TrimSpace(string(state)) != "FROZEN" {
		t.Errorf("the box's freezer.state is %q, want FROZEN", state)
	}
}

// TestPauseFreezesBox: Pause freezes a gVisor box's cgroup, nothing in
// it runs for as long as it is paused, and after the resume its clocks
// and timers go on: time.monotonic moved on by the pause, as on the host,
// and a sleep that spanned it ends.
func TestPauseFreezesBox(t *testing.T) {
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	r := &Runtime{Platform: freezablePlatform}
	sess := startBoxOn(t, r, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
	spawnQuiet(t, sess, "exec python3 -c '"+gapProbe+"'")
	run(t, sess, "for i in $(seq 600); do test -e /tmp/gap && exit 0; sleep 0.1; done; exit 1")
	spawnQuiet(t, sess, "sleep 1; touch /tmp/slept")
	before := monotonic(t, sess)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sess.Pause(ctx); err != nil {
		t.Fatalf("pause: %v", err)
	}
	requireFrozen(t, r, sess)
	time.Sleep(pauseFor)
	if err := sess.Resume(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if d := monotonic(t, sess) - before; d < pauseFor.Seconds() {
		t.Errorf("time.monotonic moved %.3f s across a %v pause, want at least the pause", d, pauseFor)
	}
	run(t, sess, "for i in $(seq 100); do test -e /tmp/slept && exit 0; sleep 0.1; done; echo the sleep never ended >&2; exit 1")
	gap, err := strconv.ParseFloat(run(t, sess, "cat /tmp/gap"), 64)
	if err != nil || gap < pauseFor.Seconds()*0.9 {
		t.Errorf("longest gap the spinning process saw = %v (%v), want at least the %v pause: the box ran while paused", gap, err, pauseFor)
	}
}

// monotonic is Python's time.monotonic in the box.
func monotonic(t *testing.T, sess *agent.Session) float64 {
	t.Helper()
	out := run(t, sess, `python3 -c 'import time; print(repr(time.monotonic()))'`)
	v, err := strconv.ParseFloat(out, 64)
	if err != nil {
		t.Fatalf("time.monotonic in the box: %q: %v", out, err)
	}
	return v
}

// TestClosePausedBox: a frozen box closes within a bound and leaves no
// process and no cgroup, both through Close and through a kill for a
// breach (Frame.Kill with no resume first).
func TestClosePausedBox(t *testing.T) {
	requireRunsc(t)
	for _, viaKill := range []bool{false, true} {
		t.Run(map[bool]string{false: "close", true: "kill"}[viaKill], func(t *testing.T) {
			r := &Runtime{Platform: freezablePlatform}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sess, err := r.Start(ctx, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
			if err != nil {
				t.Fatal(err)
			}
			b := r.boxOf(sess)
			spawnQuiet(t, sess, "while :; do :; done")
			if err := sess.Pause(ctx); err != nil {
				t.Fatalf("pause: %v", err)
			}
			requireFrozen(t, r, sess)
			cgroupDir := b.pz.fz.Path()
			done := make(chan error, 1)
			if viaKill {
				// runsc run must end by itself, not be killed after the
				// kill's graces (which Close's cleanup would hide).
				b.kill()
				select {
				case <-b.exited:
				default:
					t.Error("runsc run has not returned after the kill")
				}
				if b.forced {
					t.Error("runsc run was killed; want it to end by itself once its frozen box was killed")
				}
			}
			go func() { done <- sess.Close() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("closing the paused box: %v", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("closing the paused box took over a minute")
			}
			if out, _ := exec.Command("pgrep", "-f", b.id).Output(); len(out) > 0 {
				t.Errorf("processes of the closed box remain: %s", out)
			}
			if _, err := os.Stat(cgroupDir); !os.IsNotExist(err) {
				t.Errorf("the closed box's cgroup %s remains (%v)", cgroupDir, err)
			}
		})
	}
}

// TestPauseForkingBox: a box that forks as fast as its PIDs limit lets
// it, while being paused, is paused (frozen, or with runsc pause where it
// would not freeze in time), resumed and closed, each within a bound.
func TestPauseForkingBox(t *testing.T) {
	requireRunsc(t)
	r := &Runtime{Platform: freezablePlatform}
	s := spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}
	s.Limits.Pids = 256
	sess := startBoxOn(t, r, s)
	b := r.boxOf(sess)
	pidsMax := filepath.Join("/sys/fs/cgroup/pids", cgroupsPath(b.id), "pids.max")
	want := strconv.FormatInt(s.Limits.Pids*hostTasksPerTask+sentryTasks, 10)
	if got, err := os.ReadFile(pidsMax); err != nil || strings.TrimSpace(string(got)) != want {
		t.Fatalf("the box's %s = %q, %v; want %s before it forks hard", pidsMax, got, err, want)
	}
	// Bounded: 20000 forks at most, each a process that ends at once.
	spawnQuiet(t, sess, `i=0; while [ $i -lt 20000 ]; do /bin/true & i=$((i+1)); done; wait`)
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 5 {
		if err := sess.Pause(ctx); err != nil {
			t.Fatalf("pause %d of the forking box: %v", i, err)
		}
		if err := sess.Resume(ctx); err != nil {
			t.Fatalf("resume %d of the forking box: %v", i, err)
		}
	}
	if err := sess.Pause(ctx); err != nil {
		t.Fatalf("last pause of the forking box: %v", err)
	}
}

// TestFailedSaveOfPausedBox: a paused box (frozen on ptrace, paused by
// its sentry on systrap) whose save fails (a process holds the host's
// pipes) is either ended by runsc or left runsc-paused, and then Resume
// resumes it; either way it closes (startBoxOn's cleanup, whose waits
// are bounded).
func TestFailedSaveOfPausedBox(t *testing.T) {
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	for _, platform := range []string{freezablePlatform, "systrap"} {
		t.Run(platform, func(t *testing.T) { failSaveOfPausedBox(t, platform) })
	}
}

// failSaveOfPausedBox is TestFailedSaveOfPausedBox on one platform.
func failSaveOfPausedBox(t *testing.T, platform string) {
	r := &Runtime{Platform: platform}
	sess := startBoxOn(t, r, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
	py, err := interp.New("python", sess, sess.Env())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
	defer cancel()
	if out, err := py.Run(ctx, "x = 42", nil, nil); err != nil || out.Exception != nil {
		t.Fatalf("python: %+v, %v", out, err)
	}
	if err := sess.Pause(ctx); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if platform == freezablePlatform {
		requireFrozen(t, r, sess)
	} else if !r.boxOf(sess).pz.sentryPaused.Load() {
		t.Fatal("the systrap box was not paused by its sentry")
	}
	if err := r.Checkpoint(ctx, sess, filepath.Join(t.TempDir(), "ckpt"), CheckpointOptions{Running: true}); !errors.Is(err, ErrSaveFailed) {
		t.Fatalf("checkpoint of a box whose interpreter holds the host's pipes: %v, want ErrSaveFailed", err)
	}
	select {
	case <-sess.Done():
		t.Logf("runsc ended the box it failed to save: %v", sess.Err())
	case <-time.After(2 * time.Second):
		if !sess.Paused() {
			t.Errorf("the box runs on after a failed save, its session not paused")
		}
		if err := sess.Resume(ctx); err != nil {
			t.Fatalf("resuming the box left paused by a failed save: %v", err)
		}
		// runsc kills the processes it failed to save (both runscs
		// measured), so the interpreter is not asked to answer.
		out, err := py.Run(ctx, "x", nil, nil)
		t.Logf("the interpreter after the failed save and a resume: %+v, %v", out, err)
	}
	if err := py.Close(); err != nil {
		t.Logf("closing the interpreter: %v", err)
	}
}

// TestPauseFallsBackToRunsc: a box without a freezer of its own (as where
// runsc does not use cgroupfs) and without a control socket Warden can
// use (as with Debian's runsc) pauses with runsc pause, resumes, and
// pauses again for a checkpoint, as before the freezer.
func TestPauseFallsBackToRunsc(t *testing.T) {
	requireRunsc(t)
	r := &Runtime{}
	s := spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}
	sess := startBoxOn(t, r, s)
	b := r.boxOf(sess)
	b.pz.mu.Lock()
	b.pz.noFreezer = true
	b.pz.noControl = true
	b.pz.mu.Unlock()
	run(t, sess, "echo kept > /tmp/a")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sess.Pause(ctx); err != nil {
		t.Fatalf("pause: %v", err)
	}
	b.pz.mu.Lock()
	frozen, runscPaused := b.pz.frozen.Load(), b.pz.runscPaused.Load()
	b.pz.mu.Unlock()
	if frozen || !runscPaused {
		t.Fatalf("paused box without a freezer: frozen %v, runsc-paused %v; want runsc-paused only", frozen, runscPaused)
	}
	if err := sess.Resume(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if got := run(t, sess, "cat /tmp/a"); got != "kept" {
		t.Errorf("after a runsc pause and resume: got %q, want kept", got)
	}
	if err := sess.Pause(ctx); err != nil {
		t.Fatalf("pause: %v", err)
	}
	dir := checkpoint(t, r, sess, CheckpointOptions{})
	if got := run(t, restore(t, r, s, dir), "cat /tmp/a"); got != "kept" {
		t.Errorf("the restored copy of a runsc-paused box: got %q, want kept", got)
	}
}

// awaitExec waits until process pid has exec'd with argv0: until then
// /proc shows the test binary's command line, forked but not yet
// replaced (on a loaded host that window is long enough to read).
func awaitExec(t *testing.T, pid int, argv0 string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.HasPrefix(string(cmdline), argv0+"\x00") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d has not exec'd %q: command line %q, %v", pid, argv0, cmdline, err)
		}
	}
}

// TestIsSentryOf: only a runsc-sandbox child of the given runsc run is
// taken for the box's sentry.
func TestIsSentryOf(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tt := range []struct {
		argv0  string
		parent bool
		want   bool
	}{
		{argv0: "runsc-sandbox", parent: true, want: true},
		{argv0: "runsc-gofer", parent: true},
		{argv0: "runsc-sandbox", parent: false},
	} {
		cmd := exec.CommandContext(ctx, "/bin/sleep", "30")
		cmd.Args[0] = tt.argv0
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		awaitExec(t, cmd.Process.Pid, tt.argv0)
		run := os.Getpid()
		if !tt.parent {
			run = os.Getppid()
		}
		if got := isSentryOf(cmd.Process.Pid, run); got != tt.want {
			t.Errorf("isSentryOf(a %q child, parent %v) = %v, want %v", tt.argv0, tt.parent, got, tt.want)
		}
		_ = cmd.Process.Kill() // the test's sleep; its end is waited for next
		_ = cmd.Wait()         // killed above: the error says so
	}
}

// TestPauseSystrapAsksSentry: a box on runsc's systrap platform, which
// the freezer breaks, pauses through its sentry's control socket, not
// runsc (whose state still says running): nothing in it runs while
// paused, and its processes go on after the resume.
func TestPauseSystrapAsksSentry(t *testing.T) {
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	runsc, err := FindRunsc("")
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command(runsc, "flags").CombinedOutput(); !strings.Contains(string(out), "systrap") {
		testhost.SkipOrFail(t, "this runsc has no systrap platform")
	}
	r := &Runtime{Platform: "systrap"}
	sess := startBoxOn(t, r, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
	spawnQuiet(t, sess, "exec python3 -c '"+gapProbe+"'")
	run(t, sess, "for i in $(seq 600); do test -e /tmp/gap && exit 0; sleep 0.1; done; exit 1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sess.Pause(ctx); err != nil {
		t.Fatalf("pause: %v", err)
	}
	b := r.boxOf(sess)
	b.pz.mu.Lock()
	frozen, runscPaused, sentryPaused := b.pz.frozen.Load(), b.pz.runscPaused.Load(), b.pz.sentryPaused.Load()
	b.pz.mu.Unlock()
	if frozen || runscPaused || !sentryPaused {
		t.Errorf("paused systrap box: frozen %v, runsc-paused %v, sentry-paused %v; want sentry-paused only", frozen, runscPaused, sentryPaused)
	}
	r.controlMu.Lock()
	probe, probed := r.control[b.bin]
	r.controlMu.Unlock()
	if !probed || !probe.speaks {
		t.Errorf("probe of %s: %+v (probed %v), want its sentry to answer as the pinned urpc does", b.runsc, probe, probed)
	}
	if status, err := b.status(ctx); err != nil || status != "running" {
		t.Errorf("runsc state of a box its sentry paused = %q, %v; want running", status, err)
	}
	time.Sleep(pauseFor)
	if err := sess.Resume(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	gap, err := strconv.ParseFloat(run(t, sess, "cat /tmp/gap"), 64)
	if err != nil || gap < pauseFor.Seconds()*0.9 {
		t.Errorf("longest gap the spinning process saw = %v (%v), want at least the %v pause: the box ran while paused", gap, err, pauseFor)
	}
	run(t, sess, "for p in /proc/[0-9]*; do grep -qsx python3 $p/comm && exit 0; done; echo the probe is gone >&2; exit 1")
}

// TestDefaultPlatform: the default platform is read from the -platform
// line of `runsc flags` only, and nothing else is taken for it.
func TestDefaultPlatform(t *testing.T) {
	for _, tt := range []struct{ flags, want string }{
		{"  -platform string\n    \tspecifies which platform to use: ptrace (default), kvm. (default \"ptrace\")\n  -profile\n", "ptrace"},
		{"  -platform string\n    \tspecifies which platform to use: systrap (default), ptrace, kvm. (default \"systrap\")\n", "systrap"},
		{"  -platform string\n    \tno default here\n  -x (default \"ptrace\")\n", ""},
		{"  -profile\n", ""},
		{"  -platform string\n    (default \"ptrace", ""},
	} {
		if got := defaultPlatform(tt.flags); got != tt.want {
			t.Errorf("defaultPlatform(%q) = %q, want %q", tt.flags, got, tt.want)
		}
	}
}

// flagsRunsc writes at path a runsc whose `runsc flags` prints a
// -platform block whose default is platform (and fails for ""), once
// dir's hold file is gone (removed at the test's end at the latest, and
// the run is killed at killTimeout anyway), recording each run in dir's
// calls file; it is written aside and renamed into place, so a runsc
// replaced so is another file.
func flagsRunsc(t *testing.T, dir, path, platform string) {
	t.Helper()
	t.Cleanup(func() {
		if err := os.Remove(filepath.Join(dir, "hold")); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("letting runsc flags go: %v", err)
		}
	})
	script := `#!/bin/sh
d="` + dir + `"
echo "$1" >> "$d/calls"
while [ -f "$d/hold" ]; do sleep 0.01; done
[ -n "` + platform + `" ] || exit 1
printf '  -platform string\n    \tspecifies which platform to use. (default "%s")\n  -profile\n' "` + platform + `"
`
	writeExec(t, path+".new", script)
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// flagsCalls is how many times a flagsRunsc in dir ran.
func flagsCalls(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "calls"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "flags\n")
}

// boxOfFile is a box of r whose runsc is the file at path now; it starts
// nothing.
func boxOfFile(t *testing.T, r *Runtime, path string) *box {
	t.Helper()
	bin, err := runscKeyOf(path)
	if err != nil {
		t.Fatal(err)
	}
	return &box{r: r, runsc: path, bin: bin, id: "platform"}
}

// TestPlatform: the default platform is read once per runsc binary and
// kept by it: a runsc replaced at the same path is read again for its
// own boxes, and the boxes of the old file keep its platform; a box
// whose file was replaced before its first read gets "" (not freezable)
// without running the new file, and a read that fails is not kept.
// Platform, when set, is the answer with no read.
func TestPlatform(t *testing.T) {
	type ask struct {
		box   string // which box asks: "old" (made before the replace) or "new"
		want  string
		calls int // runs of runsc flags after the ask
	}
	for _, tt := range []struct {
		name     string
		platform string // Runtime.Platform
		before   []ask  // asks before the file is replaced
		after    []ask  // and after, by a new file
		first    string // the first file's default ("" fails)
		second   string // the second file's default
	}{
		{name: "read once per binary", first: "ptrace", second: "systrap",
			before: []ask{{"old", "ptrace", 1}, {"old", "ptrace", 1}},
			after:  []ask{{"new", "systrap", 2}, {"new", "systrap", 2}, {"old", "ptrace", 2}}},
		{name: "replaced before the first read", first: "ptrace", second: "systrap",
			after: []ask{{"old", "", 0}, {"old", "", 0}, {"new", "systrap", 1}}},
		{name: "failed read is not kept", first: "", second: "systrap",
			before: []ask{{"old", "", 1}, {"old", "", 2}},
			after:  []ask{{"new", "systrap", 3}}},
		{name: "platform set", platform: "kvm", first: "ptrace", second: "systrap",
			before: []ask{{"old", "kvm", 0}}, after: []ask{{"new", "kvm", 0}, {"old", "kvm", 0}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "runsc")
			flagsRunsc(t, dir, path, tt.first)
			r := &Runtime{Platform: tt.platform}
			boxes := map[string]*box{"old": boxOfFile(t, r, path)}
			check := func(a ask) {
				t.Helper()
				if got := r.platform(boxes[a.box]); got != a.want {
					t.Errorf("platform(the %s box) = %q, want %q", a.box, got, a.want)
				}
				if got := flagsCalls(t, dir); got != a.calls {
					t.Errorf("after the %s box's ask runsc flags ran %d times, want %d", a.box, got, a.calls)
				}
			}
			for _, a := range tt.before {
				check(a)
			}
			flagsRunsc(t, dir, path, tt.second)
			boxes["new"] = boxOfFile(t, r, path)
			for _, a := range tt.after {
				check(a)
			}
		})
	}
}

// TestPlatformNoWait: while one box's read of its runsc's default
// platform is under way (held here), another box of that binary gets ""
// (not freezable: it pauses through its sentry) at once, without waiting
// for it or reading; the read's answer is then kept for both.
func TestPlatformNoWait(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "runsc")
	flagsRunsc(t, dir, path, "ptrace")
	writeScript(t, dir, "hold", "")
	r := &Runtime{}
	first, second := boxOfFile(t, r, path), boxOfFile(t, r, path)
	firsts := make(chan string, 1)
	go func() { firsts <- r.platform(first) }()
	for deadline := time.Now().Add(10 * time.Second); flagsCalls(t, dir) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first box's read did not start within 10 s")
		}
	}
	seconds := make(chan string, 1)
	go func() { seconds <- r.platform(second) }()
	select {
	case got := <-seconds:
		if got != "" {
			t.Errorf("platform(another box) during a read = %q, want \"\"", got)
		}
	case <-time.After(10 * time.Second): // a caller that waited would wait until hold is gone
		t.Fatal("platform(another box) waited over 10 s for another box's read")
	}
	if err := os.Remove(filepath.Join(dir, "hold")); err != nil {
		t.Fatal(err)
	}
	if got := <-firsts; got != "ptrace" {
		t.Errorf("platform(the reading box) = %q, want ptrace", got)
	}
	if got := r.platform(second); got != "ptrace" {
		t.Errorf("platform(the box that did not wait) after the read = %q, want the kept ptrace", got)
	}
	if got := flagsCalls(t, dir); got != 1 {
		t.Errorf("runsc flags ran %d times, want once", got)
	}
}

// TestCheckBinary: a box whose runsc file is still the one it was made
// with after the exec keeps the freezer and its sentry; one whose file
// was replaced (renamed over, as make runsc installs) or removed in
// between pauses with runsc pause only: no freezer, no control.
func TestCheckBinary(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, path string)
		want   bool // noFreezer and noControl
	}{
		{name: "unchanged", change: func(*testing.T, string) {}},
		{name: "replaced", want: true, change: func(t *testing.T, path string) {
			writeExec(t, path+".new", "#!/bin/sh\nexit 0\n")
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "removed", want: true, change: func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "runsc")
			writeExec(t, path, "#!/bin/sh\nexit 0\n")
			b := boxOfFile(t, &Runtime{}, path)
			tt.change(t, path)
			b.checkBinary()
			if b.pz.noFreezer != tt.want || b.pz.noControl != tt.want {
				t.Errorf("after checkBinary noFreezer, noControl = %v, %v; want %v, %v", b.pz.noFreezer, b.pz.noControl, tt.want, tt.want)
			}
		})
	}
}
