package nsinit

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSweepOrphansLeavesNoneAlive checks what an exec's end rests on
// where it has no cgroup: once sweepOrphans returns, each orphan, in the
// exec's group or out of it by setsid, has ended (a zombie for the
// reaper, or gone), never still dying. The test process plays the agent
// as a child subreaper; the orphans only sleep.
func TestSweepOrphansLeavesNoneAlive(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a child subreaper: %v", err)
	}
	defer func() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); err != nil {
			t.Errorf("clearing the child subreaper flag: %v", err)
		}
	}()
	cmd := exec.Command("sh", "-c", "sleep 60 & setsid sleep 60 & sleep 60 &")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Run(); err != nil {
		t.Skipf("no sh to run: %v", err)
	}
	orphans := liveChildren(t)
	defer func() {
		for _, pid := range orphans {
			reapBounded(t, pid)
		}
	}()
	if len(orphans) != 3 {
		t.Fatalf("orphans after the shell's end = %v; want 3", orphans)
	}
	sweepOrphans(func(int) bool { return false })
	for _, pid := range orphans {
		if _, zombie, ok := statOf(pid); ok && !zombie {
			t.Errorf("orphan %d still alive after the sweep; want it ended", pid)
		}
	}
}

// liveChildren lists the test process's children that have not ended.
func liveChildren(t *testing.T) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("listing /proc: %v", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, zombie, ok := statOf(pid); ok && !zombie && ppid == os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// reapBounded kills and reaps pid, waiting at most 10 s.
func reapBounded(t *testing.T, pid int) {
	t.Helper()
	// ESRCH only: the sweep has ended it already
	_ = unix.Kill(pid, unix.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var ws unix.WaitStatus
		if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); got == pid || err != nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Errorf("orphan %d not reaped within 10 s", pid)
}
