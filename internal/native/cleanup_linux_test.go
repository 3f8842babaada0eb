package native

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/cgroup"
)

// stuckCgroup is a cgroup that cannot be removed.
type stuckCgroup struct {
	cgroup.Cgroup
	err error
}

func (c stuckCgroup) Path() string  { return "/sys/fs/cgroup/warden/1-stuck" }
func (c stuckCgroup) Delete() error { return c.err }

// TestCleanupLogsCgroupLeft: a box whose cgroup cannot be removed logs
// one warning through the Runtime's logger, naming the backend, the
// cgroup and the error, where it used to drop it.
func TestCleanupLogsCgroupLeft(t *testing.T) {
	var buf bytes.Buffer
	busy := errors.New("device or resource busy")
	b := &box{cg: stuckCgroup{err: busy}, rt: Runtime{Logger: slog.New(slog.NewTextHandler(&buf, nil))}}
	b.cleanup()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{"level=WARN", "backend=native", "cgroup=/sys/fs/cgroup/warden/1-stuck", `err="device or resource busy"`}
	if len(lines) != 1 {
		t.Fatalf("cleanup() logged %q, want one line", buf.String())
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Errorf("cleanup() logged %q, want it to contain %s", lines[0], w)
		}
	}
}
