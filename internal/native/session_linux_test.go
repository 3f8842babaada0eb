package native

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spawn"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
	"golang.org/x/sys/unix"
)

func startTestSession(t *testing.T) *agent.Session {
	t.Helper()
	testhost.RequireRoot(t)
	l := spec.DefaultLimits
	l.Timeout = 20 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Runtime{}.StartSession(ctx, spec.Spec{Limits: l, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
	if err != nil {
		t.Fatalf("StartSession() = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func execSh(t *testing.T, s *agent.Session, script string, timeout time.Duration) spec.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := s.Exec(ctx, agent.ExecSpec{Command: []string{"sh", "-c", script}, Timeout: timeout}, IO{})
	if err != nil {
		t.Fatalf("Exec(%q) = %v", script, err)
	}
	return r
}

// TestSessionKeepsFiles checks that execs share the sandbox: a file one
// writes, the next reads, as the sandbox user.
func TestSessionKeepsFiles(t *testing.T) {
	s := startTestSession(t)
	if r := execSh(t, s, "echo kept > /workspace/f; id -u", 0); r.ExitCode != 0 || r.Stdout != "1000\n" {
		t.Fatalf("first exec = exit %d, stdout %q, stderr %q; want 0, 1000", r.ExitCode, r.Stdout, r.Stderr)
	}
	if r := execSh(t, s, "cat /workspace/f", 0); r.Stdout != "kept\n" {
		t.Errorf("second exec stdout = %q, want %q", r.Stdout, "kept\n")
	}
}

// TestSessionExecTimeout checks that a timeout kills the exec and what it
// started, in its group or out of it, and leaves the session working.
func TestSessionExecTimeout(t *testing.T) {
	s := startTestSession(t)
	r := execSh(t, s, "setsid sleep 300 & sleep 300", 300*time.Millisecond)
	if !r.TimedOut || r.Signal != "SIGKILL" {
		t.Fatalf("exec = timed_out %v, signal %q; want true, SIGKILL", r.TimedOut, r.Signal)
	}
	r = execSh(t, s, "cat /proc/[0-9]*/comm", 0)
	if strings.Contains(r.Stdout, "sleep") {
		t.Errorf("after the timeout the sandbox still runs:\n%s", r.Stdout)
	}
	if r := execSh(t, s, "echo alive", 0); r.Stdout != "alive\n" {
		t.Errorf("exec after timeout stdout = %q, want alive", r.Stdout)
	}
}

func TestSessionStartFailure(t *testing.T) {
	s := startTestSession(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := s.Exec(ctx, agent.ExecSpec{Command: []string{"no-such-program"}}, IO{})
	if err != nil || r.ExitCode != 127 || !strings.Contains(r.Stderr, "not found") {
		t.Errorf("Exec(no-such-program) = exit %d, stderr %q, err %v; want 127 and a not-found message", r.ExitCode, r.Stderr, err)
	}
}

// TestSessionClose checks that Close ends the sandbox and is idempotent.
func TestSessionClose(t *testing.T) {
	s := startTestSession(t)
	path := ""
	if s.Cgroup() != nil {
		path = s.Cgroup().Path()
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	select {
	case <-s.Done():
	default:
		t.Error("Done not closed after Close")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
	if _, err := os.Stat(path); path != "" && err == nil {
		t.Errorf("cgroup %s left after Close", path)
	}
	if _, err := s.Exec(context.Background(), agent.ExecSpec{Command: []string{"true"}}, IO{}); err == nil {
		t.Error("Exec after Close succeeded, want an error")
	}
}

// TestSessionOOM checks that an exec over the session's memory limit is
// killed and reported, and the session (its agent spared) lives on.
func TestSessionOOM(t *testing.T) {
	testhost.RequireRoot(t)
	l := spec.DefaultLimits
	l.MemoryBytes = 64 * spec.MiB
	s, err := Runtime{}.StartSession(context.Background(), spec.Spec{Limits: l, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
	if err != nil {
		t.Fatalf("StartSession() = %v", err)
	}
	defer s.Close()
	if s.Cgroup() == nil {
		t.Fatal("no cgroup: the memory limit is not in force, refusing to run the bomb")
	}
	// At most 256 MiB: four times the limit, and it stops by itself.
	bomb := "b = []\nfor _ in range(256): b.append(bytearray(1 << 20))"
	r, err := s.Exec(context.Background(), agent.ExecSpec{Command: []string{"python3", "-c", bomb}}, IO{})
	if err != nil || !r.OOMKilled || r.Signal != "SIGKILL" {
		t.Fatalf("bomb = oom_killed %v, signal %q, err %v; want an OOM kill", r.OOMKilled, r.Signal, err)
	}
	if r := execSh(t, s, "echo alive", 0); r.Stdout != "alive\n" {
		t.Errorf("after the OOM kill stdout = %q, want the session alive", r.Stdout)
	}
	if cpu, ooms := s.Usage(); ooms != 1 || cpu <= 0 {
		t.Errorf("Usage() = cpu %v, %d OOM kills; want some CPU and exactly the one kill", cpu, ooms)
	}
}

func TestSessionWorkingDirectory(t *testing.T) {
	s := startTestSession(t)
	execSh(t, s, "mkdir -p /workspace/sub", 0)
	tests := []struct{ dir, want string }{
		{"", "/workspace\n"},
		{"sub", "/workspace/sub\n"},
		{"/tmp", "/tmp\n"},
	}
	for _, tt := range tests {
		r, err := s.Exec(context.Background(), agent.ExecSpec{Command: []string{"pwd"}, Dir: tt.dir}, IO{})
		if err != nil || r.Stdout != tt.want {
			t.Errorf("pwd in %q = %q, %v; want %q", tt.dir, r.Stdout, err, tt.want)
		}
	}
	r, _ := s.Exec(context.Background(), agent.ExecSpec{Command: []string{"pwd"}, Dir: "missing"}, IO{})
	if r.ExitCode != 126 || !strings.Contains(r.Stderr, "does not exist") {
		t.Errorf("pwd in a missing directory = exit %d, stderr %q; want 126 and why", r.ExitCode, r.Stderr)
	}
}

// TestSessionManyExecsFewFiles runs more execs than the session may hold
// descriptors: the agent must not keep one per exec (os/exec's pidfd).
func TestSessionManyExecsFewFiles(t *testing.T) {
	testhost.RequireRoot(t)
	l := spec.DefaultLimits
	l.OpenFiles = 32
	s, err := Runtime{}.StartSession(context.Background(), spec.Spec{Limits: l, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
	if err != nil {
		t.Fatalf("StartSession() = %v", err)
	}
	defer s.Close()
	execTrue(t, s, 100)
}

// startSlowSession starts a session of a tenth of a core, which widens
// the windows of races between the host and the agent; it ends with t.
func startSlowSession(t *testing.T) *agent.Session {
	t.Helper()
	testhost.RequireRoot(t)
	l := spec.DefaultLimits
	l.CPUs = 0.1
	l.Timeout = 20 * time.Second
	s, err := Runtime{}.StartSession(context.Background(), spec.Spec{Limits: l, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
	if err != nil {
		t.Fatalf("StartSession() = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// execTrue runs n execs of `true` in s, each of which must succeed.
func execTrue(t *testing.T, s *agent.Session, n int) {
	t.Helper()
	for i := range n {
		r, err := s.Exec(context.Background(), agent.ExecSpec{Command: []string{"true"}}, IO{})
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("exec %d = exit %d, stderr %q, err %v", i, r.ExitCode, r.Stderr, err)
		}
	}
}

// TestSessionManyExecsBesideLiveProcess runs short execs while another
// process of the session lives on, as a session's interpreter does. The
// agent's reaper then waits in the kernel and can report an exec's end
// the moment it comes, which once could be before the agent's spawning
// thread had left the exec's cgroup: the host's kill of that cgroup then
// killed the agent and the session died within a few dozen execs. A small
// CPU quota widens that window.
func TestSessionManyExecsBesideLiveProcess(t *testing.T) {
	s := startSlowSession(t)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	files := []*os.File{null, null, null}
	if _, err := s.Spawn(context.Background(), interp.Command{Argv: []string{"sleep", "3600"}, Env: s.Env(), Files: files}); err != nil {
		t.Fatalf("Spawn(sleep) = %v", err)
	}
	execTrue(t, s, 200)
}

// TestSessionSurvivesCanceledStarts cancels execs while the agent is
// starting them. Until the agent says a process started (or ended), it may
// not know the process's group yet, so a kill request could be lost (a
// sleep lived on, and the host took the box for broken when its end did
// not come within killGrace), and its spawning thread may still be in the
// process's cgroup, so killing that cgroup killed the agent. Each exec
// must fail and return, and the session live on.
func TestSessionSurvivesCanceledStarts(t *testing.T) {
	s := startSlowSession(t)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 100 {
		argv := []string{"true"}
		if i%2 == 1 {
			argv = []string{"sleep", "3600"}
		}
		done := make(chan error, 1)
		go func() {
			_, err := s.Exec(canceled, agent.ExecSpec{Command: argv}, IO{})
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("exec %d (%q) with a canceled context = nil error, want one", i, argv)
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("exec %d (%q) with a canceled context still running after 2 minutes: its kill was lost", i, argv)
		}
		select {
		case <-s.Done():
			t.Fatalf("the session ended after %d canceled execs: %v", i+1, s.Err())
		default:
		}
	}
	if r := execSh(t, s, "echo alive", 0); r.Stdout != "alive\n" {
		t.Fatalf("exec after the canceled ones = stdout %q, stderr %q, want alive", r.Stdout, r.Stderr)
	}
}

// TestSessionOOMScore checks that the code a session runs is the OOM
// killer's first choice and the agent its last.
func TestSessionOOMScore(t *testing.T) {
	s := startTestSession(t)
	// The agent holds the high score from its fork until its exec's start
	// is seen, so the exec may read the agent's before it is put back:
	// the script waits for it a bounded while.
	r := execSh(t, s, "cat /proc/self/oom_score_adj; for i in $(seq 100); do [ \"$(cat /proc/1/oom_score_adj)\" = 0 ] && break; sleep 0.02; done; cat /proc/1/oom_score_adj", 0)
	if r.Stdout != "1000\n0\n" {
		t.Errorf("oom_score_adj of an exec and the agent = %q, want 1000 and 0", r.Stdout)
	}
}

// TestSessionSurvivesFullDescriptorTable runs execs while this process
// (the server) can open only a few more descriptors, from none to enough
// for a whole exec, as a server at its RLIMIT_NOFILE under a flood of
// connections is. Each exec either runs or fails with
// spawn.ErrNoDescriptors; the session must live on and serve the next.
func TestSessionSurvivesFullDescriptorTable(t *testing.T) {
	s := startTestSession(t)
	for spare := range 12 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		release := testhost.ExhaustFDs(t, spare)
		r, err := s.Exec(ctx, agent.ExecSpec{Command: []string{"sh", "-c", "echo ran"}}, IO{})
		release()
		cancel()
		if err != nil && !errors.Is(err, spawn.ErrNoDescriptors) {
			t.Errorf("exec with %d descriptors free = %v, want success or ErrNoDescriptors", spare, err)
		}
		if err == nil && r.Stdout != "ran\n" {
			t.Errorf("exec with %d descriptors free = stdout %q, stderr %q, want ran", spare, r.Stdout, r.Stderr)
		}
		select {
		case <-s.Done():
			t.Fatalf("the session ended after an exec with %d descriptors free: %v", spare, s.Err())
		default:
		}
		if r := execSh(t, s, "echo again", 0); r.Stdout != "again\n" {
			t.Fatalf("exec after one with %d descriptors free = stdout %q, stderr %q", spare, r.Stdout, r.Stderr)
		}
	}
}

// signalWriter closes started on its first write.
type signalWriter struct {
	once    sync.Once
	started chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.started) })
	return len(p), nil
}

// TestExecEndsCleanlyWithFullDescriptorTable ends an exec, which left a
// process outside its group, while the server cannot open a descriptor:
// the exec's cgroup must still be emptied and removed once descriptors
// are free again (at the latest when the next exec starts), and the
// process must not live on into the next exec.
func TestExecEndsCleanlyWithFullDescriptorTable(t *testing.T) {
	s := startTestSession(t)
	if s.Cgroup() == nil || len(s.Cgroup().Placement().ThreadFiles) == 0 {
		testhost.SkipOrFail(t, "no per-exec cgroups on this host (cgroup v1 needed)")
	}
	// The exec leaves a process in a session of its own, which only its
	// cgroup can find, and ends a second after it started.
	script := `echo started; sleep 1; setsid sh -c 'echo > /tmp/ready; exec sleep 300' </dev/null >/dev/null 2>&1 &
while [ ! -e /tmp/ready ]; do sleep 0.01; done`
	out := &signalWriter{started: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := s.Exec(ctx, agent.ExecSpec{Command: []string{"sh", "-c", script}, Timeout: 20 * time.Second}, IO{Stdout: out})
		done <- err
	}()
	<-out.started
	// No descriptor of the exec closes before its end is settled.
	release := testhost.ExhaustFDs(t, 0)
	err := <-done
	release()
	if err != nil {
		t.Fatalf("Exec() = %v", err)
	}
	if r := execSh(t, s, "ps -eo args | grep -c '^sleep 300' || true", 0); r.Stdout != "0\n" {
		t.Errorf("processes the exec left = %q, want none", r.Stdout)
	}
	dir := filepath.Dir(s.Cgroup().Placement().ThreadFiles[0])
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			t.Errorf("exec cgroup %s is left after the exec ended", filepath.Join(dir, e.Name()))
		}
	}
}

// TestSessionDeathNamesItsCause kills a session's init from outside: the
// session's error must say how the init ended, not only that the
// connection to it closed.
func TestSessionDeathNamesItsCause(t *testing.T) {
	s := startTestSession(t)
	if s.Cgroup() == nil || len(s.Cgroup().Placement().ThreadFiles) == 0 {
		testhost.SkipOrFail(t, "no session cgroup to find the init in (cgroup v1 needed)")
	}
	procs, err := os.ReadFile(filepath.Join(filepath.Dir(s.Cgroup().Placement().ThreadFiles[0]), "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(procs)))
	if err != nil {
		t.Fatalf("the session cgroup holds %q, want the init's pid alone", procs)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	// Err says how the init ended once it has been reaped, soon after.
	const want = "the sandbox has ended: its init ended (signal: killed)"
	var got string
	for range 3000 {
		if got = s.Err().Error(); got == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("Err() = %q, want %q", got, want)
}

// TestCloseWithFullDescriptorTableLeavesNoCgroup closes a session, while
// an exec runs, with this process (the server) unable to open a single
// descriptor: its exec cgroup cannot be listed or killed then, but once
// the init has exited it is empty and removing it needs no descriptor.
// Every cgroup directory of the session must be gone when Close returns;
// they used to stay for the server's lifetime (the exec cgroup stranded,
// so the session's removal failed with EBUSY in every hierarchy).
func TestCloseWithFullDescriptorTableLeavesNoCgroup(t *testing.T) {
	s := startTestSession(t)
	dirs := sessionCgroupDirs(t, s)
	out := &signalWriter{started: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := s.Exec(context.Background(), agent.ExecSpec{Command: []string{"sh", "-c", "echo started; exec sleep 300"}}, IO{Stdout: out})
		done <- err
	}()
	<-out.started
	release := testhost.DenyFDs(t)
	err := s.Close()
	release()
	<-done //nolint:errcheck // a wait for the goroutine to end: its result is not what this test checks
	if err != nil {
		t.Logf("Close() = %v", err)
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			entries, _ := os.ReadDir(dir)
			t.Errorf("session cgroup %s after Close: %v (holding %d entries), want it gone", dir, err, len(entries))
		}
	}
}

// TestClosePausedSessionLeavesNothing pauses a session while a process it
// spawned runs (in an exec cgroup of its own on v1), then closes it: that
// process must be ended and reaped, and every cgroup of the session gone,
// when Close returns (doctor --leaks would list one left). The init's
// death ends the process anyway, so this does not show that the kill of a
// frozen box reaches it; cgroup's TestLiveKillFrozenChild does.
func TestClosePausedSessionLeavesNothing(t *testing.T) {
	s := startTestSession(t)
	dirs := sessionCgroupDirs(t, s)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	ctx := context.Background()
	if _, err := s.Spawn(ctx, interp.Command{Argv: []string{"sleep", "3600"}, Env: s.Env(), Files: []*os.File{null, null, null}}); err != nil {
		t.Fatalf("Spawn(sleep) = %v", err)
	}
	pidfds := execPidfds(t, dirs[0])
	if err := s.Pause(ctx); err != nil {
		t.Fatalf("Pause() = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close() of the paused session = %v", err)
	}
	for pid, fd := range pidfds {
		if err := unix.PidfdSendSignal(fd, 0, nil, 0); !errors.Is(err, unix.ESRCH) {
			t.Errorf("process %d of the paused session's exec cgroup after Close: signal 0 = %v, want ESRCH (ended and reaped)", pid, err)
		}
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("session cgroup %s after Close: %v, want it gone", dir, err)
		}
	}
}

// sessionCgroupDirs lists s's cgroup directories, one per hierarchy, or
// skips t where the host makes no per-exec cgroups (they need cgroup v1).
func sessionCgroupDirs(t *testing.T, s *agent.Session) []string {
	t.Helper()
	if s.Cgroup() == nil || len(s.Cgroup().Placement().ThreadFiles) == 0 {
		testhost.SkipOrFail(t, "no per-exec cgroups on this host (cgroup v1 needed)")
	}
	var dirs []string
	for _, f := range s.Cgroup().Placement().ThreadFiles {
		dirs = append(dirs, filepath.Dir(f))
	}
	return dirs
}

// execPidfds holds by a pidfd, closed at t's end, each process in the
// exec cgroups under the session cgroup dir (a pid could be reused once
// it ends, its pidfd never is), failing t when there is none.
func execPidfds(t *testing.T, dir string) map[int]int {
	t.Helper()
	execs, err := filepath.Glob(filepath.Join(dir, "e*", "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	pidfds := make(map[int]int)
	for _, f := range execs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, field := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(field)
			if err != nil {
				t.Fatalf("reading %s: %v", f, err)
			}
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				t.Fatalf("opening a pidfd for process %d of %s: %v", pid, f, err)
			}
			t.Cleanup(func() { unix.Close(fd) })
			pidfds[pid] = fd
		}
	}
	if len(pidfds) == 0 {
		t.Fatalf("no process in an exec cgroup under %s (%d found), want the spawned sleep", dir, len(execs))
	}
	return pidfds
}
