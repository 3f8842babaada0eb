package plan

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestExecutorDiesWithHost: a box whose PID 1 answers sysinfo still dies
// with its host. The answers' file identity is a FileIdentity op before
// DieWithHost, which SYSINFO only checks (changing fsuid after DieWithHost
// would clear the parent-death signal): the host here, a shell, ends while
// the program sleeps, and warden-exec must end with it, so the control
// socket reaches its end with no status.
func TestExecutorDiesWithHost(t *testing.T) {
	exe := executor(t)
	ops := []Op{
		// the program must not hold the control socket open
		{Code: CloseRange, Ints: []uint64{3, 0xffffffff, unix.CLOSE_RANGE_CLOEXEC}},
		{Code: Env, Strs: []string{"PATH=/usr/bin:/bin"}},
		{Code: OpenFD, Ints: []uint64{unix.O_RDONLY | unix.O_DIRECTORY, procFD}, Strs: []string{"/proc"}},
		{Code: FileIdentity, Ints: []uint64{boxUID, boxGID}},
		{Code: DieWithHost, Ints: []uint64{uint64(unix.SIGKILL), 3}},
		{Code: Sysinfo, Ints: []uint64{1 << 20, ^uint64(0), procFD, boxUID, boxGID}},
		notifySysinfo(),
		{Code: Exec, Ints: []uint64{boxUID, boxGID}, Strs: []string{"sleep", "/", "sleep", "4"}},
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	host, child := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "child")
	defer host.Close()
	// the shell is warden-exec's parent and ends after 1 s
	cmd := exec.Command("sh", "-c", `"$0" & sleep 1`, exe)
	cmd.ExtraFiles = []*os.File{child}
	cmd.Env = []string{"ASAN_OPTIONS=detect_leaks=0"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	if err := Send(host, encode(t, &Plan{Ops: ops})); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the host shell: %v", err)
	}
	if err := host.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("bounding the wait for the status: %v", err)
	}
	if st, err := ReadStatus(host); err == nil {
		t.Errorf("status %+v after the host ended, want none: the box outlived its host", st)
	}
}

// TestExecutorPID1KeepsNoCapability: once the program runs, PID 1 holds no
// capability (its loop needs none), as the program reads in PID 1's
// status. PID 1 drops them right after the program's exec, so the program
// polls, for at most 10 s, before it reports.
func TestExecutorPID1KeepsNoCapability(t *testing.T) {
	proc, mounts := boxProc(t)
	status := filepath.Join(proc, "1", "status")
	script := `for i in $(seq 100); do grep -q '^CapPrm:[[:space:]]*0*$' "$0" 2>/dev/null && break; sleep 0.1; done; grep -E '^Cap(Prm|Eff|Inh|Amb)' "$0"`
	ops := append(mounts,
		Op{Code: Env, Strs: []string{"PATH=/usr/bin:/bin"}},
		Op{Code: Exec, Ints: []uint64{boxUID, boxGID}, Strs: []string{"sh", "/", "sh", "-c", script, status}})
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	st, out := runExecutorWith(t, encode(t, &Plan{Ops: ops}), false, execOptions{attr: attr})
	if st.Kind != StatusRan || st.ExitCode != 0 {
		t.Fatalf("status %+v, want the program run (stdout %q)", st, out)
	}
	want := "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapAmb:\t0000000000000000\n"
	if out != want {
		t.Errorf("PID 1's capabilities:\n%s\nwant:\n%s", out, want)
	}
}

// boxProc makes a directory the program can reach (t.TempDir's parent is
// 0700) and returns where the ops it returns mount the box's /proc.
func boxProc(t *testing.T) (string, []Op) {
	t.Helper()
	dir := reachableDir(t, "warden-proc")
	proc := filepath.Join(dir, "proc")
	if err := os.Mkdir(proc, 0o755); err != nil {
		t.Fatal(err)
	}
	return proc, []Op{
		{Code: Mount, Ints: []uint64{unix.MS_REC | unix.MS_PRIVATE, 0}, Strs: []string{"none", "/", "", ""}},
		{Code: Mount, Ints: []uint64{unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, 0}, Strs: []string{"proc", proc, "proc", ""}},
	}
}

// TestExecutorCPULimitOnlyTheProgram: RLIMIT_CPU is the program's alone:
// it has it from its start, while PID 1, whose drain and answers would
// count against it and whose SIGKILL at the limit would lose the status,
// has none.
func TestExecutorCPULimitOnlyTheProgram(t *testing.T) {
	proc, mounts := boxProc(t)
	script := `grep 'Max cpu time' /proc/self/limits "$0"/1/limits | tr -s ' '`
	ops := append(mounts,
		Op{Code: Setrlimit, Ints: []uint64{unix.RLIMIT_CPU, 7}},
		Op{Code: Env, Strs: []string{"PATH=/usr/bin:/bin"}},
		Op{Code: Exec, Ints: []uint64{boxUID, boxGID}, Strs: []string{"sh", "/", "sh", "-c", script, proc}})
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	st, out := runExecutorWith(t, encode(t, &Plan{Ops: ops}), false, execOptions{attr: attr})
	if st.Kind != StatusRan || st.ExitCode != 0 {
		t.Fatalf("status %+v, want the program run (stdout %q)", st, out)
	}
	want := "/proc/self/limits:Max cpu time 7 7 seconds \n" + proc + "/1/limits:Max cpu time unlimited unlimited seconds \n"
	if out != want {
		t.Errorf("the limits:\n%s\nwant:\n%s", out, want)
	}
}

// reachableDir makes a directory under the system's temporary directory
// that the sandbox user can reach (t.TempDir's parent is 0700), removed
// when the test ends.
func reachableDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("removing %s: %v", dir, err)
		}
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
