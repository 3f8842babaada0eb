package measure

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestAcctGroupChargesOrphans: a command started in a group is charged
// with what it leaves running after it exits, which wait4's rusage of
// the command misses (as bubblewrap's PID 1 outlives bwrap), and no thread
// of this process stays in the group.
func TestAcctGroupChargesOrphans(t *testing.T) {
	testhost.RequireRoot(t)
	g, err := NewAcctGroup(fmt.Sprintf("measure-test-%d", os.Getpid()))
	if err != nil {
		testhost.SkipOrFail(t, "no cpuacct cgroup (v1): "+err.Error())
	}
	defer g.Remove()
	// The orphan does a bounded amount of work, then exits by itself.
	cmd := exec.Command("sh", "-c", `sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done' & exit 0`)
	before, err := g.Total()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(cmd); err != nil {
		t.Fatalf("starting in the group: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the command: %v", err)
	}
	if err := g.Settle(2 * time.Minute); err != nil {
		t.Fatalf("settling: %v", err)
	}
	after, err := g.Total()
	if err != nil {
		t.Fatal(err)
	}
	rusage := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	if got := after - before; got <= rusage {
		t.Errorf("the group was charged %.4f s, no more than the command's own rusage %.4f s: the orphan's CPU is missing", got, rusage)
	}
	tasks, err := os.ReadFile(filepath.Join(g.dir, "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	if left := strings.Fields(string(tasks)); len(left) > 0 {
		t.Errorf("threads %v are still in the group after the command ended (this process is %d)", left, os.Getpid())
	}
}

// TestAcctGroupStartKeepsChild: when the thread that forked cannot move
// back out of the group, the child has started all the same, so Start
// returns no error and the caller can wait for it (an error would leave
// it running unwaited).
func TestAcctGroupStartKeepsChild(t *testing.T) {
	dir := t.TempDir()
	// Plain directories, not cgroups: the way in is a file that takes
	// the write, the way back a directory that does not exist.
	g := &AcctGroup{dir: dir, home: filepath.Join(dir, "gone")}
	cmd := exec.Command("true")
	if err := g.Start(cmd); err != nil {
		t.Fatalf("got error %v with the child started, want nil", err)
	}
	if cmd.Process == nil {
		t.Fatal("got no process: the child was not started")
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("waiting for the child: %v", err)
	}
}

// TestAcctGroupEnterNotBack: when this process cannot move back out of
// the group, Enter's error says so (ErrNotBack), beside f's own error,
// so that the program stops rather than charge all it does next to the
// group.
func TestAcctGroupEnterNotBack(t *testing.T) {
	dir := t.TempDir()
	ferr := errors.New("the server did not start")
	tests := []struct {
		name    string
		home    string
		f       error
		notBack bool
	}{
		{"back", dir, nil, false},
		{"back, f failed", dir, ferr, false},
		{"not back", filepath.Join(dir, "gone"), nil, true},
		{"not back, f failed", filepath.Join(dir, "gone"), ferr, true},
	}
	for _, tt := range tests {
		// Plain directories, not cgroups: each write to cgroup.procs
		// succeeds where the directory exists.
		g := &AcctGroup{dir: dir, home: tt.home}
		err := g.Enter(func() error { return tt.f })
		if got := errors.Is(err, ErrNotBack); got != tt.notBack {
			t.Errorf("%s: got error %v, ErrNotBack %v; want %v", tt.name, err, got, tt.notBack)
		}
		if tt.f != nil && !errors.Is(err, tt.f) {
			t.Errorf("%s: got error %v, want it to wrap f's %v", tt.name, err, tt.f)
		}
	}
}
