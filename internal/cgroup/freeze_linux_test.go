package cgroup

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// busyCgroup makes a cgroup with a shell spinning in it, or skips where
// the host cannot freeze one.
func busyCgroup(t testing.TB) (Cgroup, *exec.Cmd) {
	t.Helper()
	requireCgroups(t)
	c, err := New(boxname.New(), Limits{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Kill(); _ = c.Thaw(); _ = c.Delete() })
	if err := c.Freeze(time.Second); errors.Is(err, errors.ErrUnsupported) {
		testhost.SkipOrFail(t, "this host cannot freeze a cgroup: "+err.Error())
	} else if err != nil {
		t.Fatalf("Freeze of an empty cgroup: %v", err)
	}
	if err := c.Thaw(); err != nil {
		t.Fatalf("Thaw: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cmd, release := gated(t, ctx, `while :; do :; done`)
	if err := c.AddProc(cmd.Process.Pid); err != nil {
		t.Fatalf("AddProc: %v", err)
	}
	release()
	return c, cmd
}

// cpu is what c has counted of CPU time.
func cpu(t testing.TB, c Cgroup) time.Duration {
	t.Helper()
	s, err := c.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return s.CPUTime
}

func TestLiveFreezeThaw(t *testing.T) {
	c, _ := busyCgroup(t)
	start := cpu(t, c)
	if !waitFor(30*time.Second, func() bool { return cpu(t, c) > start }) {
		t.Fatal("the busy loop never used CPU")
	}
	if err := c.Freeze(freezeWait); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	frozen := cpu(t, c)
	time.Sleep(200 * time.Millisecond) // a spinning loop would use all of it
	if after := cpu(t, c); after != frozen {
		t.Errorf("a frozen cgroup used %v of CPU, want none", after-frozen)
	}
	if err := c.Thaw(); err != nil {
		t.Fatalf("Thaw: %v", err)
	}
	if !waitFor(30*time.Second, func() bool { return cpu(t, c) > frozen }) {
		t.Error("the thawed loop never ran again")
	}
}

// TestLiveKillFrozen: SIGKILL to frozen tasks takes effect at the thaw,
// which is how a paused session ends.
func TestLiveKillFrozen(t *testing.T) {
	c, cmd := busyCgroup(t)
	freezeKillThaw(t, c)
	killAndWait(t, c, cmd)
}

// TestLiveKillFrozenChild: the kill that ends a paused session reaches
// the processes of its child cgroups (a session's execs, on v1) too, so
// none of them runs again at the thaw. The process is not in a PID
// namespace of its own here, so nothing but Kill ends it.
func TestLiveKillFrozenChild(t *testing.T) {
	c, _ := busyCgroup(t)
	child, err := c.Child("e1")
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip("child cgroups are made on cgroup v1 only: " + err.Error())
	}
	if err != nil {
		t.Fatalf("Child: %v", err)
	}
	t.Cleanup(func() { _ = child.Kill(); _ = child.Delete() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cmd, release := gated(t, ctx, "exec sleep 60")
	if err := child.AddProc(cmd.Process.Pid); err != nil {
		t.Fatalf("AddProc into the child: %v", err)
	}
	release()
	freezeKillThaw(t, c)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL || ctx.Err() != nil {
		t.Errorf("the child cgroup's process ended with %v (the test's bound passed: %v), want SIGKILL from the parent's Kill", err, ctx.Err() != nil)
	}
}

// freezeKillThaw ends c as a paused session ends: freeze, kill, thaw.
func freezeKillThaw(t *testing.T, c Cgroup) {
	t.Helper()
	if err := c.Freeze(freezeWait); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	if err := c.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := c.Thaw(); err != nil {
		t.Fatalf("Thaw: %v", err)
	}
}

// freezeWait bounds the tests' freezes, which a loaded host may slow.
const freezeWait = 10 * time.Second

// BenchmarkFreezeThaw is the latency of one freeze and one thaw of a
// cgroup with a spinning process in it; compare with BenchmarkNewDelete
// from the same run.
func BenchmarkFreezeThaw(b *testing.B) {
	c, _ := busyCgroup(b)
	for b.Loop() {
		if err := c.Freeze(freezeWait); err != nil {
			b.Fatal(err)
		}
		if err := c.Thaw(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSettle: a cgroup that never reports frozen (a box keeping itself
// from freezing) is thawed again within the wait, and the freeze fails.
func TestSettle(t *testing.T) {
	tests := []struct {
		name   string
		frozen func() (bool, error)
		// fails says Freeze fails, and so thaws the cgroup again; is is
		// what its error must be, when set.
		fails bool
		is    error
	}{
		{"frozen", func() (bool, error) { return true, nil }, false, nil},
		{"never frozen", func() (bool, error) { return false, nil }, true, ErrFreezeTimeout},
		{"unreadable", func() (bool, error) { return false, errors.New("gone") }, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			thawed := false
			err := settle("test", 5*time.Millisecond, tt.frozen, func() error { thawed = true; return nil })
			if (err != nil) != tt.fails || tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("settle() = %v, want failure %v (%v)", err, tt.fails, tt.is)
			}
			if thawed != tt.fails {
				t.Errorf("thawed = %v, want %v", thawed, tt.fails)
			}
		})
	}
}
