package nsinit

import (
	"testing"

	"github.com/warden-sandbox/warden/internal/seccomp"
)

// TestAnswersCoverNotified requires an answer for every syscall the
// filter sends the init, and none for one it never sends: a syscall added
// to the seccomp policy's notified list without an answer would make each
// call fail with ENOSYS.
func TestAnswersCoverNotified(t *testing.T) {
	for _, nr := range seccomp.Notified {
		if answers[nr] == nil {
			t.Errorf("syscall %d is in seccomp.Notified but has no answer in answers", nr)
		}
	}
	if len(answers) != len(seccomp.Notified) {
		t.Errorf("answers has %d entries, seccomp.Notified %d: want one answer per notified syscall", len(answers), len(seccomp.Notified))
	}
}
