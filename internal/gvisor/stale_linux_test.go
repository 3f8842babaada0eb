package gvisor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/boxname"
)

// TestStaleSweepEndsFrozen: the gVisor backend's own stale sweep (warden
// run and warden mcp reach it without warden serve's) kills and thaws a
// dead Warden's frozen cgroup, where runsc delete would wait on a frozen
// sentry for good. A sleep stands in for the sentry; cgroup v1 only.
func TestStaleSweepEndsFrozen(t *testing.T) {
	requireRunsc(t)
	base := "/sys/fs/cgroup/freezer/warden"
	if _, err := os.Stat(base); err != nil {
		t.Skipf("no v1 freezer hierarchy of Warden's here: %v", err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if boxname.Alive(dead.Process.Pid) {
		t.Skipf("pid %d was reused already", dead.Process.Pid)
	}
	dir := filepath.Join(base, strconv.Itoa(dead.Process.Pid)+"-stale")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0) // already thawed where the sweep worked
		_ = os.Remove(dir)                                                         // the sweep removed it where it worked
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sleep := exec.CommandContext(ctx, "sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		_ = sleep.Wait() // killed by the sweep or by ctx: either says it ended
		close(ended)
	}()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("FROZEN"), 0); err != nil {
		t.Fatal(err)
	}
	runsc, err := FindRunsc("")
	if err != nil {
		t.Fatal(err)
	}
	(&Runtime{}).removeStale(runsc)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Error("the dead Warden's frozen process still runs after the gVisor stale sweep")
	}
}

// TestStaleContainers: the runsc records of a dead Warden's containers
// are found by their state files; a live Warden's, and files of other
// shapes, are not.
func TestStaleContainers(t *testing.T) {
	root := t.TempDir()
	dead := fmt.Sprintf("warden-%d-0123456789abcdef", deadPID(t))
	live := fmt.Sprintf("warden-%d-0123456789abcdef", os.Getpid())
	for _, name := range []string{
		dead + "_sandbox:" + dead + ".state", dead + "_sandbox:" + dead + ".lock", "runsc-" + dead + ".sock",
		live + "_sandbox:" + live + ".state", "null-netns", "other_sandbox:other.state",
	} {
		if err := os.WriteFile(filepath.Join(root, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := staleContainers(root), []string{dead}; !slices.Equal(got, want) {
		t.Errorf("staleContainers = %v, want %v", got, want)
	}
	if got := staleContainers(filepath.Join(root, "missing")); got != nil {
		t.Errorf("staleContainers of a missing root = %v, want none", got)
	}
}

// deadPID is the pid of a process that has ended: a `true` run and
// waited for.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}
