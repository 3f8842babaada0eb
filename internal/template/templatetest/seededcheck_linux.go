package templatetest

import (
	"context"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
)

// CheckSeeded runs SeededScript in sess, a box on a Seeded template, and
// checks it printed SeededWant: the seeded check every boxed backend's
// test shares.
func CheckSeeded(t *testing.T, sess *agent.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := sess.Exec(ctx, agent.ExecSpec{Command: []string{"sh", "-c", SeededScript}}, agent.IO{})
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 0 || r.Stdout != SeededWant {
		t.Errorf("seeded files: got exit %d, stdout %q, stderr %q; want %q", r.ExitCode, r.Stdout, r.Stderr, SeededWant)
	}
}
