package spawn

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestReap: how a process ended is read the same whether its exit is
// seen through its pidfd in the poller or, without a pidfd, in a
// blocking wait.
func TestReap(t *testing.T) {
	tests := []struct {
		name      string
		script    string
		pidfd     bool
		kill      bool
		wantExit  int
		wantKill  bool
		wantState string
	}{
		{"exit through the pidfd", "exit 7", true, false, 7, false, "exit status 7"},
		{"killed, through the pidfd", "exec sleep 60", true, true, -1, true, "signal: killed"},
		{"exit without a pidfd", "exit 7", false, false, 7, false, "exit status 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("/bin/sh", "-c", tt.script)
			cmd.SysProcAttr = &syscall.SysProcAttr{}
			pidfd := &[]int{-1}[0]
			if tt.pidfd {
				pidfd = WithPidfd(cmd)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if tt.pidfd && *pidfd < 0 {
				t.Fatal("Start gave no pidfd")
			}
			if tt.kill {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			e, err := Reap(cmd, *pidfd)
			if err != nil {
				t.Errorf("Reap's poll failed: %v", err)
			}
			if got := e.Status.ExitStatus(); got != tt.wantExit {
				t.Errorf("exit status %d, want %d", got, tt.wantExit)
			}
			if got := e.Status.Signaled() && e.Status.Signal() == syscall.SIGKILL; got != tt.wantKill {
				t.Errorf("killed by SIGKILL: %v, want %v", got, tt.wantKill)
			}
			if got := e.String(); got != tt.wantState {
				t.Errorf("Exit %q, want %q", got, tt.wantState)
			}
			if tt.pidfd && fdOpen(*pidfd) {
				t.Errorf("Reap left the pidfd %d open", *pidfd)
			}
		})
	}
}

// TestReapParks: while Reap waits for a process, no thread of this one
// sleeps in waitid (or any other blocking wait); the exit then arrives
// through the pidfd.
func TestReapParks(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The child waits for the pipe's end, which the test decides.
	cmd := exec.Command("/bin/sh", "-c", "read x; exit 3")
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	pidfd := WithPidfd(cmd)
	if err := cmd.Start(); err != nil {
		w.Close()
		t.Fatal(err)
	}
	done := make(chan *Exit, 1)
	go func() {
		e, err := Reap(cmd, *pidfd)
		if err != nil {
			t.Errorf("Reap's poll failed: %v", err)
		}
		done <- e
	}()
	testhost.NoBlockedWaits(t, os.Getpid(), 30)
	w.Close()
	if e := <-done; e.Status.ExitStatus() != 3 {
		t.Errorf("Exit %v, want exit status 3", e)
	}
}

// TestReapWithoutDescriptors: Reap waits in the poller even while this
// process may open no descriptor at all (a soft RLIMIT_NOFILE of 0, as a
// server under a flood of connections is tested): it used to ask poll(2),
// which then fails with EINVAL, so every reap fell back to a blocking
// wait and logged "polling the pidfd: invalid argument".
func TestReapWithoutDescriptors(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "exit 5")
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	pidfd := WithPidfd(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	release := testhost.DenyFDs(t)
	e, err := Reap(cmd, *pidfd)
	release()
	if err != nil {
		t.Errorf("Reap() with no descriptor to spare: %v, want the wait in the poller", err)
	}
	if got := e.Status.ExitStatus(); got != 5 {
		t.Errorf("exit status %d, want 5", got)
	}
}

// fdOpen says whether fd is open in this process as a pidfd.
func fdOpen(fd int) bool {
	l, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	return err == nil && l == "anon_inode:[pidfd]"
}
