package agent

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/spec"
)

// guestExec runs one exec against g, which reports started (unless
// started is "") and exited with the given oom_kills fields, and returns
// its Result.
func guestExec(t *testing.T, s *Session, g *streamGuest, started, exited string) spec.Result {
	t.Helper()
	res := execAsync(s, nil)
	req, chans := g.spawned()
	if started != "" {
		g.event(fmt.Sprintf(`{"kind":"started","id":%d,"pid":7%s}`, req.ID, started))
	}
	for _, ch := range chans {
		if ch != nil {
			ch.Close()
		}
	}
	g.event(fmt.Sprintf(`{"kind":"exited","id":%d,"status":{"exit_code":137,"signal":9}%s}`, req.ID, exited))
	o := await(t, res, "the exec")
	if o.err != nil {
		t.Fatalf("Exec() = %v", o.err)
	}
	return o.r
}

// TestGuestOOMs: a box that counts its own OOM kills (a microVM guest)
// reports its cgroup's count around each exec; an exec's kills are the
// count's rise during it, never a false kill from a count that went back,
// and Usage is the highest count reported.
func TestGuestOOMs(t *testing.T) {
	s, g := attachStreamFrame(t, spec.DefaultLimits, func(f *Frame) { f.GuestOOMs = true })
	steps := []struct {
		name            string
		started, exited string
		wantOOM         bool
		wantUsage       uint64
	}{
		{"no kill", `,"oom_kills":0`, ``, false, 0},
		{"killed", ``, `,"oom_kills":1`, true, 1},
		{"a kill before it started is not its own", `,"oom_kills":2`, `,"oom_kills":2`, false, 2},
		{"count went back", `,"oom_kills":5`, `,"oom_kills":3`, false, 5},
		{"exited before started: the kills since the host's last count", "", `,"oom_kills":6`, true, 6},
	}
	for _, st := range steps {
		r := guestExec(t, s, g, st.started, st.exited)
		if r.OOMKilled != st.wantOOM {
			t.Errorf("%s: oom_killed %v, want %v", st.name, r.OOMKilled, st.wantOOM)
		}
		if _, got := s.Usage(); got != st.wantUsage {
			t.Errorf("%s: Usage() ooms = %d, want %d", st.name, got, st.wantUsage)
		}
	}
}

// TestGuestOOMsRefused: OOM counts from a box that does not count its own
// (every backend's but microvm's), or past the bound, end the session as
// a breach.
func TestGuestOOMsRefused(t *testing.T) {
	for _, tc := range []struct {
		name      string
		guestOOMs bool
		exited    string
		want      string
	}{
		{"from a box the host counts", false, `,"oom_kills":1`, "only a box that counts its own"},
		{"past the bound", true, `,"oom_kills":4294967297`, "is more than 4294967296"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, g := attachStreamFrame(t, spec.DefaultLimits, func(f *Frame) { f.GuestOOMs = tc.guestOOMs })
			res := execAsync(s, nil)
			req, _ := g.spawned()
			g.event(fmt.Sprintf(`{"kind":"exited","id":%d,"status":{"exit_code":0}%s}`, req.ID, tc.exited))
			await(t, s.Done(), "the session's end")
			if err := s.Err(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Err() = %v, want it to say %q", err, tc.want)
			}
			await(t, res, "the exec")
		})
	}
}

// nullCgroup is a host cgroup that is never used but to be removed: Kill
// and Delete succeed, anything else panics (the nil interface).
type nullCgroup struct{ cgroup.Cgroup }

func (nullCgroup) Kill() error   { return nil }
func (nullCgroup) Delete() error { return nil }

// TestGuestOOMsWithCgroup: a Frame that counts OOM kills both in the
// guest and in a host cgroup is refused by Attach, in one line, before
// any count could be taken twice.
func TestGuestOOMsWithCgroup(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, box := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "box")
	defer box.Close()
	exited := make(chan struct{})
	var once sync.Once
	f := Frame{
		Control: host, Stream: true, GuestOOMs: true, Cgroup: nullCgroup{},
		Env:     func(extra []string) []string { return extra },
		Kill:    func() { once.Do(func() { close(exited) }) },
		Exited:  exited,
		Cleanup: func() {},
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	s, err := Attach(ctx, f)
	if err == nil {
		s.Close()
		t.Fatal("Attach with GuestOOMs and a Cgroup succeeded, want a refusal")
	}
	if want := "not both"; !strings.Contains(err.Error(), want) {
		t.Errorf("Attach() = %v, want an error saying %q", err, want)
	}
}
