package kubeback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// TestUnanswered: a Pod that answered no new connection in time is a busy
// session (another replica may hold it); any other failure stays as it is.
func TestUnanswered(t *testing.T) {
	other := errors.New("connection refused")
	for _, c := range []struct {
		name string
		err  error
		busy bool
	}{
		{"handshake deadline", fmt.Errorf("dialing: %w", os.ErrDeadlineExceeded), true},
		{"context deadline", fmt.Errorf("dialing: %w", context.DeadlineExceeded), true},
		{"refused", other, false},
	} {
		got := unanswered(c.err)
		if errors.Is(got, sandbox.ErrBusy) != c.busy || !errors.Is(got, c.err) {
			t.Errorf("%s: got %v, want busy %v wrapping %v", c.name, got, c.busy, c.err)
		}
	}
}

// TestPodDeathCause: a dead session's cause is Find's reason without
// the session and ErrDead Find puts before it, and the whole error when
// Find words it otherwise.
func TestPodDeathCause(t *testing.T) {
	prefix := `session "s1": session is dead: `
	for _, c := range []struct{ err, want string }{
		{prefix + "its Pod default-x was deleted", "its Pod default-x was deleted"},
		{"reading session \"s1\"'s claim: timeout", "reading session \"s1\"'s claim: timeout"},
	} {
		if got := (podDeath{err: errors.New(c.err), prefix: prefix}).Cause(); got != c.want {
			t.Errorf("Cause of %q: got %q, want %q", c.err, got, c.want)
		}
	}
}
