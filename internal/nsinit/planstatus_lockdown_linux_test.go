package nsinit

import (
	"runtime"
	"syscall"
	"testing"

	"github.com/warden-sandbox/warden/internal/plan"
	"github.com/warden-sandbox/warden/internal/seccomp"
)

// TestFromPlanLockdown: a lockdown step warden-exec reports failed reads
// as the Go init's own lockdown error for that step. The Go init's errors
// are made for real on a thread of this test that first gives up every
// capability (the thread ends with its goroutine, never given back):
// dropping the bounding set then fails at capability 0, taking
// capabilities back fails, and a filter without no_new_privs is refused.
func TestFromPlanLockdown(t *testing.T) {
	goErrs := make(chan [3]error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread is spoilt
		var errs [3]error
		if err := keepOnly(nil); err != nil {
			t.Errorf("giving up the thread's capabilities: %v", err)
		}
		errs[0] = dropBounding()
		errs[1] = keepOnly(agentCaps)
		errs[2] = seccomp.InstallOnThread()
		goErrs <- errs
	}()
	errs := <-goErrs
	tests := []struct {
		step  int32
		errno syscall.Errno
		goErr error
	}{
		{plan.LockBounding, syscall.EPERM, errs[0]},
		{plan.LockCapset, syscall.EPERM, errs[1]},
		{plan.LockFilter, syscall.EACCES, errs[2]},
	}
	p := &plan.Plan{}
	cfg := &Config{Command: []string{"true"}}
	for _, tc := range tests {
		if tc.goErr == nil {
			t.Errorf("step %d: the Go init's lockdown did not fail", tc.step)
			continue
		}
		want := Status{Error: lockdownError{tc.goErr}.Error()}
		if got := FromPlan(p, plan.Status{Kind: plan.StatusLockdown, Op: tc.step, Errno: int32(tc.errno)}, cfg); got != want {
			t.Errorf("step %d: got  %+v\nwant %+v", tc.step, got, want)
		}
	}
}
