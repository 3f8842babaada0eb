package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/cgroup"
)

// In root mode Warden maps the sandbox user to a host uid leased from this
// pool (internal/native/idpool_linux.go); every process of a sandbox runs
// under one of them on the host.
const (
	poolUIDBase = 0x7E000000
	poolUIDSize = 0x10000
)

// sandboxMark returns a unique --env pair. Other sandboxes may run on this
// host at the same time (other tests, other people), so a test recognises
// its own processes by pool uid and this mark in their environment.
func sandboxMark() string { return "WARDEN_E2E_MARK=" + rand.Text() }

// poolProcs lists the pids of live processes that run under a pool uid and
// carry mark in their environment.
func poolProcs(mark string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil || !poolUID(status) {
			continue
		}
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		if bytes.Contains(env, []byte(mark+"\x00")) {
			out = append(out, pid)
		}
	}
	return out
}

// poolUID tells whether any of the uids on a /proc/PID/status Uid line is
// in the pool.
func poolUID(status []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Uid:")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(rest) {
			if u, err := strconv.ParseUint(f, 10, 32); err == nil && u >= poolUIDBase && u < poolUIDBase+poolUIDSize {
				return true
			}
		}
	}
	return false
}

// waitFor polls cond every 20ms until it holds or d has passed, and
// reports whether it held.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requireNoSandboxProcs fails t if processes marked with mark are still
// alive 5 s after their run ended (the kernel tears a PID namespace down
// asynchronously), and kills them so they do not outlive the test.
func requireNoSandboxProcs(t *testing.T, mark string) {
	t.Helper()
	var left []int
	if waitFor(5*time.Second, func() bool { left = poolProcs(mark); return len(left) == 0 }) {
		return
	}
	t.Errorf("%d sandbox processes outlived their run: %s", len(left), describeProcs(left))
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func describeProcs(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		b.WriteString("\n  pid " + strconv.Itoa(pid) + ": " + strings.ReplaceAll(string(bytes.TrimRight(cmd, "\x00")), "\x00", " "))
	}
	return b.String()
}

// TestLifecycleNothingOutlivesRun runs programs that try to leave something
// behind. Each run must return as soon as the main program ends, with its
// output, and no process of it may remain on the host.
func TestLifecycleNothingOutlivesRun(t *testing.T) {
	requireSandbox(t)
	tests := []struct {
		name   string
		script string
	}{
		{"background child", `sleep 1000 & echo hi`},
		{"background child holding stdout and stderr", `sh -c 'exec sleep 1000' >&1 2>&2 & echo hi`},
		{"setsid double fork", `(setsid sh -c 'sleep 1000' &) ; echo hi`},
		{"ignores SIGTERM and SIGHUP", `(trap '' TERM HUP; exec sleep 1000) & echo hi`},
		{"setsid double fork ignoring SIGTERM", `(setsid sh -c 'trap "" TERM HUP; sleep 1000 & sleep 1000' &) ; echo hi`},
		{"stopped child", `sh -c 'kill -STOP $$; exec sleep 1000' & c=$!
i=0; while [ $i -lt 200 ] && ! grep -q '^State:.*T' /proc/$c/status; do sleep 0.01; i=$((i+1)); done
grep -q '^State:.*T' /proc/$c/status && echo hi`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mark := sandboxMark()
			// --timeout only stops a broken Warden from waiting for the
			// children for a minute; the run must end with the main program.
			r := sh(t, tt.script, "--env", mark, "--timeout", "20s")
			if r.Stdout != "hi\n" || r.ExitCode != 0 || r.TimedOut {
				t.Errorf("stdout %q exit %d timed_out %v, want \"hi\\n\" 0 false (stderr %q)", r.Stdout, r.ExitCode, r.TimedOut, r.Stderr)
			}
			requireNoSandboxProcs(t, mark)
		})
	}
}

// TestLifecycleWardenKilled kills warden with SIGKILL while its program
// runs. Warden gets no chance to clean up, so the kernel must take the
// sandbox down with it (the init's parent-death signal), and the next
// warden run must remove the cgroup the dead one left (RemoveStale).
func TestLifecycleWardenKilled(t *testing.T) {
	requireSandbox(t)
	mark := sandboxMark()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, wardenBin, withExecutor([]string{"run", "--env", mark, "--timeout", "60s", "--", "sleep", "1000"})...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	wpid := cmd.Process.Pid
	var initPid int
	t.Cleanup(func() {
		// Whatever the outcome, end what this test started.
		if initPid > 0 {
			_ = syscall.Kill(initPid, syscall.SIGKILL)
		}
		for _, pid := range poolProcs(mark) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if !waitFor(10*time.Second, func() bool { return len(poolProcs(mark)) > 0 }) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the sandboxed sleep never appeared on the host")
	}
	initPid = childOf(wpid)
	if len(cgroupDirsOf(t, wpid)) == 0 {
		t.Errorf("no cgroup %d-* exists while warden %d runs", wpid, wpid)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	var left []int
	if !waitFor(10*time.Second, func() bool { left = poolProcs(mark); return len(left) == 0 && !alive(initPid) }) {
		init := ""
		if alive(initPid) {
			init = "\nand the sandbox init is still alive:" + describeProcs([]int{initPid})
		}
		t.Errorf("10 s after warden was SIGKILLed, %d sandbox processes remain:%s%s", len(left), describeProcs(left), init)
		// Kill them so the stale cgroup below becomes removable.
		if initPid > 0 {
			_ = syscall.Kill(initPid, syscall.SIGKILL)
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		waitFor(5*time.Second, func() bool { return len(poolProcs(mark)) == 0 && !alive(initPid) })
	}

	if r := runJSON(t, "--", "true"); r.ExitCode != 0 || r.Error != "" {
		t.Fatalf("the next run failed: exit %d error %q", r.ExitCode, r.Error)
	}
	if dirs := cgroupDirsOf(t, wpid); len(dirs) > 0 {
		t.Errorf("the next warden run left the killed warden's cgroups behind: %q", dirs)
	}
}

// childOf returns the pid of a child of ppid, or 0.
func childOf(ppid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/task/" + strconv.Itoa(ppid) + "/children")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			pid, _ := strconv.Atoi(f[0])
			return pid
		}
	}
	// The init may have been cloned from another thread of warden.
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(ppid) + "/task")
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/task/" + task.Name() + "/children")
		if f := strings.Fields(string(b)); len(f) > 0 {
			pid, _ := strconv.Atoi(f[0])
			return pid
		}
	}
	return 0
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// TestLifecycleLeavesNoHostTraces checks that runs which end in different
// ways leave no cgroup, mount or temporary directory on the host.
func TestLifecycleLeavesNoHostTraces(t *testing.T) {
	requireSandbox(t)
	mountsBefore := mountLines(t)
	tmpBefore := wardenTmpEntries(t)
	ws := hostWorkspace(t, t.TempDir())
	tests := []struct {
		name string
		args []string
	}{
		{"plain", []string{"--", "true"}},
		{"failing program", []string{"--", "sh", "-c", "exit 3"}},
		{"host workspace", []string{"--workspace", ws, "--", "sh", "-c", "echo x > /workspace/f"}},
		{"killed at timeout", []string{"--timeout", "1s", "--", "sh", "-c", "sleep 1000 & sleep 1000"}},
		{"killed at memory limit", []string{"--memory", "32MiB", "--", "python3", "-c", "b = b'x' * (256 << 20)"}},
		{"command not found", []string{"--", "no-such-command-e2e"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, wardenBin, withExecutor(append([]string{"run", "--json"}, tt.args...))...)
			out, err := cmd.Output()
			var ee *exec.ExitError
			if ctx.Err() != nil {
				t.Fatalf("warden did not return within 30 s")
			}
			if err != nil && !errors.As(err, &ee) {
				t.Fatalf("running warden: %v", err)
			}
			if !bytes.Contains(out, []byte(`"error":""`)) {
				t.Errorf("warden failed itself: %s", out)
			}
			if dirs := cgroupDirsOf(t, cmd.Process.Pid); len(dirs) > 0 {
				t.Errorf("warden %d left its cgroups behind: %q", cmd.Process.Pid, dirs)
			}
		})
	}
	// Only additions count: other people's work on this host may unmount
	// things meanwhile, and that is no trace of Warden's.
	if added := addedMounts(t, mountsBefore, mountLines(t)); len(added) > 0 {
		t.Errorf("the runs left %d mounts in the host's mount table: %q", len(added), added)
	}
	if added := addedLines(tmpBefore, wardenTmpEntries(t)); len(added) > 0 {
		t.Errorf("the runs left entries in the host's %s: %q", os.TempDir(), added)
	}
}

// addedLines returns the lines of after that before does not hold, counting
// duplicates.
func addedLines(before, after []string) []string {
	n := make(map[string]int)
	for _, l := range before {
		n[l]++
	}
	var out []string
	for _, l := range after {
		if n[l] > 0 {
			n[l]--
			continue
		}
		out = append(out, l)
	}
	return out
}

// mountLines returns the host mount table without the mount ids, which
// the kernel may reuse.
func mountLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) > 4 {
			out = append(out, strings.Join(f[3:], " "))
		}
	}
	return out
}

// sharedMount says a mount point holds what root's sandboxes share on
// purpose and the first sandbox of a boot (or of a changed /etc) mounts:
// the device nodes and the /etc templates.
func sharedMount(dir string) bool {
	return dir == "/run/warden-dev" || strings.HasPrefix(dir, "/run/warden-etc/")
}

// addedMounts are the mountLines of after that before does not hold,
// except the shared mounts (sharedMount), which may appear but at most
// once per path: a second would be a mount made again per sandbox.
func addedMounts(t *testing.T, before, after []string) []string {
	t.Helper()
	per := map[string]int{}
	var added []string
	for _, l := range after {
		if f := strings.Fields(l); len(f) > 1 && sharedMount(f[1]) {
			per[f[1]]++
		}
	}
	for dir, n := range per {
		if n > 1 {
			t.Errorf("%d mounts on %s, want at most one (shared by every sandbox)", n, dir)
		}
	}
	for _, l := range addedLines(before, after) {
		if f := strings.Fields(l); len(f) < 2 || !sharedMount(f[1]) {
			added = append(added, l)
		}
	}
	return added
}

// wardenTmpEntries lists the entries of the host's /tmp named warden*,
// except the build directories of e2e suites (TestMain's, and those of
// other people running the suite on this host at the same time).
func wardenTmpEntries(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(strings.ToLower(n), "warden") && !strings.HasPrefix(n, "warden-e2e-") {
			out = append(out, n)
		}
	}
	return out
}

// cgroupsEmpty says no cgroup in dirs, nor any below them, holds a
// process (an unreadable cgroup.procs counts as empty: the cgroup is gone).
func cgroupsEmpty(dirs []string) bool {
	for _, dir := range dirs {
		empty := true
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil // gone meanwhile: nothing in it
			}
			if b, err := os.ReadFile(filepath.Join(p, "cgroup.procs")); err == nil && len(bytes.TrimSpace(b)) > 0 {
				empty = false
				return filepath.SkipAll
			}
			return nil
		})
		if !empty {
			return false
		}
	}
	return true
}

// cgroupDirsOf lists the sandbox cgroups named after warden process pid.
func cgroupDirsOf(t *testing.T, pid int) []string {
	t.Helper()
	var out []string
	parents := cgroup.Parents()
	if len(parents) == 0 {
		t.Fatal("found no cgroup hierarchy Warden would use")
	}
	for _, parent := range parents {
		dirs, _ := filepath.Glob(filepath.Join(parent, strconv.Itoa(pid)+"-*"))
		out = append(out, dirs...)
	}
	return out
}
