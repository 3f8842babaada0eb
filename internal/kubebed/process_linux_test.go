package kubebed

import (
	"testing"
)

// TestSignalGroupRefusesNonPositive: a pid <= 0 would make kill(-pid)
// signal every process (-1) or the test's own group (0); signal 0 only
// checks, so the test is harmless even if the guard were gone.
func TestSignalGroupRefusesNonPositive(t *testing.T) {
	for _, pid := range []int{0, -1, 1 - 1<<31} {
		if err := signalGroup(pid, 0); err == nil {
			t.Errorf("signalGroup(%d): got nil, want an error", pid)
		}
	}
}
