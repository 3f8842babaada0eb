package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/gvisor"
)

// TestCrashRecoveryPausedGvisor: a server SIGKILLed while a gVisor
// session is paused leaves its box frozen in the cgroup runsc made,
// where the sandbox cannot handle the kill of its agent's hang-up. The
// next server's cgroup sweep kills and thaws it and removes its cgroups,
// within a bound; its first gVisor box removes the dead server's runsc
// container and directory; and it reports the session dead. It runs
// runsc from the server's PATH, or runscEnv's.
func TestCrashRecoveryPausedGvisor(t *testing.T) {
	requireBackend(t, "gvisor")
	stateDir := filepath.Join(t.TempDir(), "state")
	// ptrace: the one platform whose boxes Warden freezes.
	flags := append([]string{"--backend", "gvisor", "--runsc-platform", "ptrace", "--state-dir", stateDir}, runscFlags()...)
	s1 := startServer(t, flags...)
	id := s1.newSession(t, keyA, nil)
	if r := s1.code(t, keyA, id, "python", "x = 1", nil); r.ExitCode != 0 {
		t.Fatalf("running code: %+v", r)
	}
	s1.jsonCall(t, keyA, "POST", sessionPath(id, "/pause"), nil, http.StatusOK, nil)
	frozen := 0
	for _, dir := range cgroupDirsOf(t, s1.pid) {
		if st, err := os.ReadFile(filepath.Join(dir, "freezer.state")); err == nil && strings.TrimSpace(string(st)) == "FROZEN" {
			frozen++
		}
	}
	if frozen != 1 {
		t.Errorf("%d frozen cgroups of the paused box, want 1: it was not paused by the freezer", frozen)
	}
	if err := syscall.Kill(s1.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = s1.exit()
	boxes := "box-warden-" + strconv.Itoa(s1.pid) + "-"
	t.Logf("%d runsc processes of the paused box outlived its server", len(runscProcs(boxes)))

	s2 := startServer(t, flags...)
	var left []int
	if !waitFor(10*time.Second, func() bool { left = runscProcs(boxes); return len(left) == 0 }) {
		t.Errorf("10 s after the restart, %d runsc processes of the paused box remain:%s", len(left), describeProcs(left))
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL) // the test's own cleanup; the error above is the finding
		}
	}
	if !waitFor(10*time.Second, func() bool { return len(cgroupDirsOf(t, s1.pid)) == 0 }) {
		t.Errorf("the restarted server left the crashed one's cgroups: %q", cgroupDirsOf(t, s1.pid))
	}
	var got sessionState
	s2.jsonCall(t, keyA, "GET", sessionPath(id), nil, http.StatusOK, &got)
	if got.State != "dead" {
		t.Errorf("recovered session = %+v, want dead", got)
	}
	// The first box of the new server sweeps the dead one's runsc state.
	s2.newSession(t, keyA, nil)
	if dirs, _ := filepath.Glob(filepath.Join(gvisor.StateDir, boxes+"*")); len(dirs) > 0 {
		t.Errorf("the restarted server's first box left the crashed one's box directories: %q", dirs)
	}
}

// runscProcs are the host's runsc processes (run, sandbox, gofer) whose
// command line names a box directory starting with prefix.
func runscProcs(prefix string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.Contains(string(cmd), "runsc") && strings.Contains(string(cmd), prefix) {
			out = append(out, pid)
		}
	}
	return out
}
