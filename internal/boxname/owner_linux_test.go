package boxname

import (
	"os"
	"os/exec"
	"testing"
)

// TestSelfJudged: this process's own identity is live, and a child that
// ended is dead, through the real /proc.
func TestSelfJudged(t *testing.T) {
	me, err := Self()
	if err != nil {
		t.Fatalf("Self: %v", err)
	}
	if me.PID != os.Getpid() || me.Boot == "" || me.PidNS == 0 || me.Start == 0 {
		t.Fatalf("Self() = %+v, want this pid and a boot id, pid namespace and start time", me)
	}
	if got := Judge(me); got != OwnerLive {
		t.Errorf("Judge(Self()) = %d, want OwnerLive", got)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("running true for a dead pid: %v", err)
	}
	gone := me
	gone.PID = cmd.Process.Pid
	if _, g, _ := startTime(gone.PID); !g {
		t.Skipf("pid %d was reused already", gone.PID)
	}
	if got := Judge(gone); got != OwnerDead {
		t.Errorf("Judge(%v) of an ended child = %d, want OwnerDead", gone, got)
	}
}
