package nsinit

import (
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestEndedChild checks what a spawn's wait for the reaper rests on: a
// child that has ended shows as one until it is reaped, and then not.
func TestEndedChild(t *testing.T) {
	if endedChild() {
		t.Fatal("endedChild() = true before any child; want false")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skipf("no true to run: %v", err)
	}
	var info unix.Siginfo
	// Blocks until the child has ended, leaving it unreaped.
	if err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatalf("waiting for the child's end: %v", err)
	}
	if !endedChild() {
		t.Error("endedChild() = false with an unreaped child; want true")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("reaping the child: %v", err)
	}
	if endedChild() {
		t.Error("endedChild() = true after the reap; want false")
	}
}

// TestAwaitReaperWaitsForTheReap checks a spawn's hold: with a child
// ended and a reaper that gets to it only later, awaitReaper returns
// once it has been reaped, so the next exec cannot list it.
func TestAwaitReaperWaitsForTheReap(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skipf("no true to run: %v", err)
	}
	var info unix.Siginfo
	// Blocks until the child has ended, leaving it unreaped.
	if err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatalf("waiting for the child's end: %v", err)
	}
	reaped := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond) // a reaper that lags
		reaped <- cmd.Wait()
	}()
	awaitReaper()
	if endedChild() {
		t.Error("endedChild() = true after awaitReaper; want the child reaped")
	}
	if err := <-reaped; err != nil {
		t.Errorf("reaping the child: %v", err)
	}
}
