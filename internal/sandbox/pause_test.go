package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
)

// boxOf is the fake box of owner's session id.
func boxOf(t *testing.T, m *Manager, owner, id string) *fakeBox {
	t.Helper()
	s, err := m.lookupCtx(context.Background(), owner, id)
	if err != nil {
		t.Fatal(err)
	}
	return s.box.(*fakeBox)
}

func TestPauseResume(t *testing.T) {
	m, _ := newTestManager(t, Config{ReapEvery: time.Hour})
	ctx := context.Background()
	info, s := sessionOf(t, m, "alice")
	box := s.box.(*fakeBox)
	got, err := m.Pause(ctx, "alice", info.ID)
	if err != nil || got.State != StatePaused || got.PausedAt.IsZero() || !box.isPaused() {
		t.Fatalf("Pause() = %+v, %v, box paused %v; want paused", got, err, box.isPaused())
	}
	if got, err := m.Pause(ctx, "alice", info.ID); err != nil || got.State != StatePaused {
		t.Errorf("Pause() again = %+v, %v; want paused, no error", got, err)
	}
	if _, err := m.Pause(ctx, "bob", info.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Pause() by another owner = %v, want ErrNotFound", err)
	}
	got, err = m.Resume(ctx, "alice", info.ID)
	if err != nil || got.State != StateReady || !got.PausedAt.IsZero() || box.isPaused() {
		t.Fatalf("Resume() = %+v, %v, box paused %v; want ready", got, err, box.isPaused())
	}
	if got, err := m.Resume(ctx, "alice", info.ID); err != nil || got.State != StateReady {
		t.Errorf("Resume() again = %+v, %v; want ready, no error", got, err)
	}
}

func TestExecResumesPausedSession(t *testing.T) {
	m, _ := newTestManager(t, Config{ReapEvery: time.Hour})
	ctx := context.Background()
	info, err := m.Create(ctx, "alice", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pause(ctx, "alice", info.ID); err != nil {
		t.Fatal(err)
	}
	r, err := m.Exec(ctx, "alice", info.ID, ExecRequest{Command: []string{"echo", "hi"}}, Stream{})
	if err != nil || r.Stdout != "echo hi" {
		t.Fatalf("Exec() on a paused session = %+v, %v; want it run", r, err)
	}
	if got, _ := m.Get(context.Background(), "alice", info.ID); got.State != StateReady || boxOf(t, m, "alice", info.ID).isPaused() {
		t.Errorf("after the exec: state %s, box paused %v; want ready and running", got.State, boxOf(t, m, "alice", info.ID).isPaused())
	}
}

func TestPauseRefusesBusySession(t *testing.T) {
	m, b := newTestManager(t, Config{ReapEvery: time.Hour})
	ctx := context.Background()
	info, s := sessionOf(t, m, "alice")
	box := s.box.(*fakeBox)
	box.block = make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := m.Exec(ctx, "alice", info.ID, ExecRequest{Command: []string{"sleep"}}, Stream{})
		done <- err
	}()
	if !waitUntil(func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.lastExec != nil }) {
		t.Fatal("the exec never started")
	}
	_, err := m.Pause(ctx, "alice", info.ID)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "once the exec ends") {
		t.Errorf("Pause() during an exec = %v; want ErrBusy saying to pause once it ends", err)
	}
	close(box.block)
	if err := <-done; err != nil {
		t.Errorf("Exec() = %v", err)
	}
	if box.isPaused() {
		t.Error("the refused pause stopped the box")
	}
}

func TestPausedSessionHoldsNoRunSlot(t *testing.T) {
	m, _ := newTestManager(t, Config{ReapEvery: time.Hour, MaxSessions: 1, MaxPaused: 1})
	ctx := context.Background()
	first, err := m.Create(ctx, "alice", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pause(ctx, "alice", first.ID); err != nil {
		t.Fatal(err)
	}
	second, err := m.Create(ctx, "alice", defaultOptions())
	if err != nil {
		t.Fatalf("Create() beside a paused session = %v; want its run slot free", err)
	}
	if _, err := m.Pause(ctx, "alice", second.ID); !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "--max-paused") {
		t.Errorf("Pause() past --max-paused = %v; want ErrTooMany naming the flag", err)
	}
	if got, _ := m.Get(context.Background(), "alice", second.ID); got.State != StateReady {
		t.Errorf("refused pause left the session %s, want ready", got.State)
	}
	if _, err := m.Resume(ctx, "alice", first.ID); !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "--max-sessions") {
		t.Errorf("Resume() with every run slot taken = %v; want ErrTooMany naming --max-sessions", err)
	}
	if got, _ := m.Get(context.Background(), "alice", first.ID); got.State != StatePaused {
		t.Errorf("refused resume left the session %s, want paused", got.State)
	}
	if err := m.Delete(ctx, "alice", second.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Resume(ctx, "alice", first.ID); err != nil {
		t.Errorf("Resume() once a slot is free = %v", err)
	}
	if _, err := m.Create(ctx, "alice", defaultOptions()); !errors.Is(err, ErrTooMany) {
		t.Errorf("Create() beside the resumed session = %v; want ErrTooMany, its slot is taken again", err)
	}
}

func TestDeletePausedSessionGivesBackItsSlot(t *testing.T) {
	m, b := newTestManager(t, Config{ReapEvery: time.Hour, MaxPaused: 1})
	ctx := context.Background()
	for range 3 {
		info, err := m.Create(ctx, "alice", defaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Pause(ctx, "alice", info.ID); err != nil {
			t.Fatalf("Pause() = %v; want the deleted session's paused slot given back", err)
		}
		if err := m.Delete(ctx, "alice", info.ID); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.alive(); n != 0 {
		t.Errorf("%d boxes alive after deleting paused sessions, want 0", n)
	}
}

func TestPausedSessionTimers(t *testing.T) {
	m, b := newTestManager(t, Config{ReapEvery: time.Hour})
	ctx := context.Background()
	o := defaultOptions()
	o.IdleTimeout, o.TTL = time.Minute, time.Hour
	info, err := m.Create(ctx, "alice", o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pause(ctx, "alice", info.ID); err != nil {
		t.Fatal(err)
	}
	// Idle thirty times over: a paused session's idle timer is stopped,
	// so the reaper picks nothing (it starts no end to wait for).
	m.reap(time.Now().Add(30 * time.Minute))
	if got, err := m.Get(context.Background(), "alice", info.ID); err != nil || got.State != StatePaused {
		t.Fatalf("after its idle timeout: %+v, %v; want still paused", got, err)
	}
	m.reap(time.Now().Add(2 * time.Hour))
	if !waitUntil(func() bool { return len(m.List("alice")) == 0 && b.alive() == 0 }) {
		t.Fatal("the paused session outlived its TTL")
	}
}

func TestAutoPause(t *testing.T) {
	reaped := make(chan string, 4)
	m, _ := newTestManager(t, Config{ReapEvery: time.Hour, MaxPaused: 1, OnReap: func(_, why string) { reaped <- why }})
	ctx := context.Background()
	o := defaultOptions()
	o.IdleTimeout, o.AutoPause = time.Minute, true
	first, err := m.Create(ctx, "alice", o)
	if err != nil {
		t.Fatal(err)
	}
	second, err := m.Create(ctx, "alice", o)
	if err != nil {
		t.Fatal(err)
	}
	if !first.AutoPause {
		t.Errorf("Create() = %+v, want AutoPause", first)
	}
	m.reap(time.Now().Add(2 * time.Minute))
	// One takes the only paused slot; the other cannot, and ends as idle.
	var paused, gone int
	settled := waitUntil(func() bool {
		paused, gone = 0, 0
		for _, id := range []string{first.ID, second.ID} {
			got, err := m.Get(context.Background(), "alice", id)
			switch {
			case errors.Is(err, ErrNotFound):
				gone++
			case got.State == StatePaused:
				paused++
			}
		}
		return paused == 1 && gone == 1
	})
	if !settled {
		t.Errorf("after the idle timeout: %d paused, %d ended; want one of each (--max-paused 1)", paused, gone)
	}
	if why := <-reaped; why != "idle" {
		t.Errorf("OnReap told %q for the session that could not pause, want idle", why)
	}
}

func TestPauseFailureLeavesSessionReady(t *testing.T) {
	m, _ := newTestManager(t, Config{ReapEvery: time.Hour, MaxPaused: 1})
	ctx := context.Background()
	info, s := sessionOf(t, m, "alice")
	box := s.box.(*fakeBox)
	box.pauseErr = ErrUnsupported
	if _, err := m.Pause(ctx, "alice", info.ID); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Pause() on a box that cannot = %v, want ErrUnsupported", err)
	}
	if got, _ := m.Get(context.Background(), "alice", info.ID); got.State != StateReady {
		t.Errorf("state after a failed pause = %s, want ready", got.State)
	}
	box.pauseErr = nil
	if _, err := m.Pause(ctx, "alice", info.ID); err != nil {
		t.Errorf("Pause() = %v; want the failed pause's paused slot given back", err)
	}
}

func TestPausedSessionRecord(t *testing.T) {
	st := newFakeStore(t)
	m, _ := newTestManager(t, Config{ReapEvery: time.Hour, Store: st})
	ctx := context.Background()
	info, err := m.Create(ctx, "alice", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pause(ctx, "alice", info.ID); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	rec := st.records[info.ID]
	st.mu.Unlock()
	if !rec.Paused {
		t.Fatalf("record after Pause() = %+v, want Paused", rec)
	}
	// A server that crashed with the session paused: the next finds it dead.
	again := NewManager(&fakeBackend{}, Config{ReapEvery: time.Hour, Store: st})
	defer again.Close()
	got, err := again.Get(context.Background(), "alice", info.ID)
	if err != nil || got.State != StateDead || !strings.Contains(got.Reason, "while the session was paused") {
		t.Errorf("recovered paused session = %+v, %v; want dead, saying it was paused", got, err)
	}
	if _, err := m.Resume(ctx, "alice", info.ID); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	rec = st.records[info.ID]
	st.mu.Unlock()
	if rec.Paused {
		t.Errorf("record after Resume() = %+v, want not Paused", rec)
	}
}

// TestPauseStateUnknownEndsSession: a pause or resume that leaves the box
// maybe paused, maybe running (a runtime that switched it and then
// failed) is not trusted either way: the session ends, dead, and gives
// back its slots, so a box running uncounted cannot outlast it.
func TestPauseStateUnknownEndsSession(t *testing.T) {
	unknown := fmt.Errorf("%w: the engine timed out", ErrPauseUnknown)
	for _, tc := range []struct {
		name string
		call func(m *Manager, box *fakeBox, id string) error
	}{
		{"pause", func(m *Manager, box *fakeBox, id string) error {
			box.pauseErr = unknown
			_, err := m.Pause(context.Background(), "alice", id)
			return err
		}},
		{"resume", func(m *Manager, box *fakeBox, id string) error {
			if _, err := m.Pause(context.Background(), "alice", id); err != nil {
				t.Fatal(err)
			}
			box.resumeErr = unknown
			_, err := m.Resume(context.Background(), "alice", id)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestManager(t, Config{ReapEvery: time.Hour, MaxSessions: 1, MaxPaused: 1})
			info, err := m.Create(context.Background(), "alice", defaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			err = tc.call(m, boxOf(t, m, "alice", info.ID), info.ID)
			if !errors.Is(err, ErrDead) || !strings.Contains(err.Error(), "unknown state") {
				t.Errorf("got %v, want ErrDead naming the unknown state", err)
			}
			if got, _ := m.Get(context.Background(), "alice", info.ID); got.State != StateDead {
				t.Errorf("state = %s, want dead", got.State)
			}
			if _, err := m.Create(context.Background(), "alice", defaultOptions()); err != nil {
				t.Errorf("Create() after the session ended = %v; want its run slot given back", err)
			}
		})
	}
}

// boxWatchInterp is an interpreter that records, at Close, whether its
// box had ended: one in a frozen box cannot end before its box does.
type boxWatchInterp struct {
	fakeInterp
	box       *fakeBox
	boxClosed bool
}

func (i *boxWatchInterp) Close() error {
	select {
	case <-i.box.done:
		i.boxClosed = true
	default:
	}
	return nil
}

// TestEndPausedSessionClosesBoxFirst: ending a paused session (delete,
// TTL, a failed resume) closes its box before its interpreters, which
// could not end while it is frozen; a running one's go first.
func TestEndPausedSessionClosesBoxFirst(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pause bool
		end   func(m *Manager, s *session) error
	}{
		{"delete paused", true, func(m *Manager, s *session) error { return m.Delete(context.Background(), "alice", s.id) }},
		{"bury paused", true, func(m *Manager, s *session) error { m.bury(s, "test"); return nil }},
		{"delete running", false, func(m *Manager, s *session) error { return m.Delete(context.Background(), "alice", s.id) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestManager(t, Config{ReapEvery: time.Hour})
			info, s := sessionOf(t, m, "alice")
			in := &boxWatchInterp{box: s.box.(*fakeBox)}
			s.mu.Lock()
			s.interps = map[string]interp.Interpreter{"python": in}
			s.mu.Unlock()
			if tc.pause {
				if _, err := m.Pause(context.Background(), "alice", info.ID); err != nil {
					t.Fatal(err)
				}
			}
			if err := tc.end(m, s); err != nil {
				t.Fatal(err)
			}
			if in.boxClosed != tc.pause {
				t.Errorf("box closed before the interpreter: %v, want %v", in.boxClosed, tc.pause)
			}
		})
	}
}

// TestSetNetworkLeavesPausedSession: the egress rules are the host's, so
// changing a paused session's leaves it paused.
func TestSetNetworkLeavesPausedSession(t *testing.T) {
	m, _ := newTestManager(t, Config{ReapEvery: time.Hour})
	info, err := m.Create(context.Background(), "alice", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pause(context.Background(), "alice", info.ID); err != nil {
		t.Fatal(err)
	}
	got, err := m.SetNetwork(context.Background(), "alice", info.ID, []string{"example.com"}, nil)
	if err != nil || got.State != StatePaused || !boxOf(t, m, "alice", info.ID).isPaused() {
		t.Errorf("SetNetwork() on a paused session = %+v, %v; want it left paused", got, err)
	}
}

// TestAutoPauseFailure: only an auto-pause that cannot pause (a backend
// that cannot, no paused slot) ends the idle session; any other failure
// leaves it ready for the reaper's next round.
func TestAutoPauseFailure(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		wantEnd bool
	}{
		{"cannot pause", fmt.Errorf("%w: no freezer", ErrUnsupported), true},
		{"no paused slot", fmt.Errorf("%w: --max-paused", ErrTooMany), true},
		{"runtime failed", errors.New("runsc pause: exit status 1"), false},
		{"busy", fmt.Errorf("%w: an exec runs", ErrBusy), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestManager(t, Config{ReapEvery: time.Hour})
			info, s := sessionOf(t, m, "alice")
			s.box.(*fakeBox).pauseErr = tc.err
			if got := m.autoPause(s); got != tc.wantEnd {
				t.Errorf("autoPause() says end %v, want %v", got, tc.wantEnd)
			}
			if got, _ := m.Get(context.Background(), "alice", info.ID); got.State != StateReady {
				t.Errorf("state after the failed auto-pause = %s, want ready", got.State)
			}
		})
	}
}

// TestPauseResumePaced: pause and resume each take a command exec's
// tokens from the session's pacer, host CPU no cgroup counts.
func TestPauseResumePaced(t *testing.T) {
	m, info, s, _ := pacedSession(t)
	for _, call := range []struct {
		name string
		do   func(context.Context, string, string) (Info, error)
	}{{"pause", m.Pause}, {"resume", m.Resume}} {
		before := s.pace.lim.TokensAt(s.pace.now())
		if _, err := call.do(context.Background(), "alice", info.ID); err != nil {
			t.Fatalf("%s: %v", call.name, err)
		}
		if got := before - s.pace.lim.TokensAt(s.pace.now()); got != commandExecCost {
			t.Errorf("%s took %g tokens, want %d (a command's)", call.name, got, commandExecCost)
		}
	}
}

// TestPauseErrorPublic: a box's pause failure tells the tenant one line
// without the host's detail (cgroup paths, runsc's output), which stays
// in the operator's full line; a box that cannot pause is ErrUnsupported.
func TestPauseErrorPublic(t *testing.T) {
	for _, tc := range []struct {
		name            string
		err             error
		wantUnsupported bool
	}{
		{"freeze timeout", errors.New("freezing cgroup /sys/fs/cgroup/freezer/warden-123/s1: did not stop"), false},
		{"no freezer", fmt.Errorf("%w: the freezer /sys/fs/cgroup/freezer is not mounted", ErrUnsupported), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := boxError("s1", "pausing", tc.err)
			var pe *PauseError
			if !errors.As(err, &pe) || strings.Contains(pe.Public(), "/sys/") || !strings.Contains(err.Error(), "/sys/") {
				t.Errorf("boxError() = %v (public %q); want the path in the full line only", err, pe.Public())
			}
			if got := errors.Is(err, errors.ErrUnsupported); got != tc.wantUnsupported {
				t.Errorf("errors.Is(ErrUnsupported) = %v, want %v", got, tc.wantUnsupported)
			}
		})
	}
}
