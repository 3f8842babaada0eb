package plan

import (
	"os"
	"os/exec"
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
