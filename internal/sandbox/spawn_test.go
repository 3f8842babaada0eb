package sandbox

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
)

// spawnBox is a fakeBox that starts fakeProcs.
type spawnBox struct {
	*fakeBox
	mu    sync.Mutex
	procs []*fakeProc
	last  interp.Command
	// killErr, if set, is what the procs' Kill fails with.
	killErr error
	// entered, if set, is told of each Spawn, which then waits for hold.
	entered chan struct{}
	hold    chan struct{}
}

func (b *spawnBox) Spawn(_ context.Context, c interp.Command) (interp.Process, error) {
	if b.entered != nil {
		b.entered <- struct{}{}
		<-b.hold
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p := &fakeProc{end: make(chan struct{}), killErr: b.killErr}
	b.procs = append(b.procs, p)
	b.last = c
	return p, nil
}

// fakeProc runs until killed, or for ever if its Kill fails with killErr.
type fakeProc struct {
	once    sync.Once
	end     chan struct{}
	killed  bool
	killErr error
}

func (p *fakeProc) Wait() (interp.ExitStatus, error) {
	<-p.end
	return interp.ExitStatus{Code: 137, Signal: 9}, nil
}

func (p *fakeProc) Kill() error {
	if p.killErr != nil {
		return p.killErr
	}
	p.once.Do(func() { p.killed = true; close(p.end) })
	return nil
}

// spawnSession is a session of alice's whose box spawns fakeProcs, with
// its pacer on a fake clock.
func spawnSession(t *testing.T) (*Manager, *session, *spawnBox, *fakeClock) {
	t.Helper()
	m, info, s, clock := pacedSession(t)
	s.mu.Lock() // watchBox reads the box under s.mu
	box := &spawnBox{fakeBox: s.box.(*fakeBox)}
	s.box = box
	s.mu.Unlock()
	_ = info
	return m, s, box, clock
}

// TestSpawnStartsBesideExecs: a spawn runs in the caller's own session
// (another owner's is not found), with the session's environment and the
// asked directory, while the session is busy with an exec too; it costs
// the pacer a command's tokens and marks the session used.
func TestSpawnStartsBesideExecs(t *testing.T) {
	m, s, box, _ := spawnSession(t)
	ctx := context.Background()
	cmd := interp.Command{Argv: []string{"sleep", "9"}, Env: []string{"A=1"}, Dir: "/workspace/sub"}
	if _, err := m.Spawn(ctx, "bob", s.id, cmd); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob's spawn in alice's session: got %v, want ErrNotFound", err)
	}
	if _, err := m.Spawn(ctx, "alice", "ses_nope", cmd); !errors.Is(err, ErrNotFound) {
		t.Fatalf("spawn in no session: got %v, want ErrNotFound", err)
	}
	s.mu.Lock()
	s.state = StateBusy
	s.lastUsed = time.Unix(0, 0)
	s.mu.Unlock()
	before := s.pace.lim.TokensAt(s.pace.now())
	p, err := m.Spawn(ctx, "alice", s.id, cmd)
	if err != nil {
		t.Fatalf("spawn in a busy session: %v", err)
	}
	if _, ok := p.(*Spawned); !ok {
		t.Errorf("Spawn returned a %T, want *Spawned (with ChargeOutput)", p)
	}
	if got := before - s.pace.lim.TokensAt(s.pace.now()); got != commandExecCost {
		t.Errorf("a spawn took %g tokens, want %d (a command's)", got, commandExecCost)
	}
	if s.info().LastUsedAt.Before(time.Now().Add(-time.Minute)) {
		t.Errorf("the spawn did not mark the session used: last used %v", s.info().LastUsedAt)
	}
	box.mu.Lock()
	got := box.last
	box.mu.Unlock()
	if len(got.Env) != 1 || got.Env[0] != "A=1" || got.Dir != "/workspace/sub" || got.Argv[0] != "sleep" {
		t.Errorf("box got %+v, want the command with the session's environment (the fake's is just the extra)", got)
	}
}

// TestSpawnRefusals: a bad command, a dead, stopping or ended session
// each get the Manager's error, and nothing starts.
func TestSpawnRefusals(t *testing.T) {
	tests := []struct {
		name  string
		cmd   []string
		env   []string
		setup func(*session, *spawnBox)
		want  error
	}{
		{"no argv", nil, nil, nil, spec.ErrInvalid},
		{"empty program", []string{""}, nil, nil, spec.ErrInvalid},
		{"bad env", []string{"true"}, []string{"NOEQUALS"}, nil, spec.ErrInvalid},
		{"dead", []string{"true"}, nil, func(s *session, _ *spawnBox) { s.state, s.reason = StateDead, "oom" }, ErrDead},
		{"stopping", []string{"true"}, nil, func(s *session, _ *spawnBox) { s.state = StateStopping }, ErrClosed},
		// The fake's Close must not close done again: the Manager buries
		// the session (closing its box) as soon as it sees done closed.
		{"box ended", []string{"true"}, nil, func(_ *session, b *spawnBox) { b.once.Do(func() {}); close(b.done) }, ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, s, box, _ := spawnSession(t)
			if tt.setup != nil {
				s.mu.Lock()
				tt.setup(s, box)
				s.mu.Unlock()
			}
			_, err := m.Spawn(context.Background(), "alice", s.id, interp.Command{Argv: tt.cmd, Env: tt.env})
			if !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
			if n := len(box.procs); n != 0 {
				t.Errorf("%d processes started, want none", n)
			}
			// Let the Manager's cleanup end the session as usual.
			s.mu.Lock()
			s.state = StateReady
			s.mu.Unlock()
		})
	}
}

// TestSpawnedDiesWithSession: deleting the session kills its spawned
// processes, and their Wait returns.
func TestSpawnedDiesWithSession(t *testing.T) {
	m, s, box, _ := spawnSession(t)
	p, err := m.Spawn(context.Background(), "alice", s.id, interp.Command{Argv: []string{"sleep", "9"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(context.Background(), "alice", s.id); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _, _ = p.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the spawned process outlived its session by 10 s")
	}
	box.mu.Lock()
	defer box.mu.Unlock()
	if !box.procs[0].killed {
		t.Error("the process ended without being killed")
	}
}

// TestSpawnedPaysOutput: output the caller sends on is taken from the
// session's pacer at the exec rate (small pieces carried over), and once
// its tokens run out the next payment stalls, on a fake clock, until its
// context ends, which gives the tokens back.
func TestSpawnedPaysOutput(t *testing.T) {
	m, s, _, _ := spawnSession(t)
	p, err := m.Spawn(context.Background(), "alice", s.id, interp.Command{Argv: []string{"yes"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill() }()
	sp := p.(*Spawned)
	stalls := make(chan time.Duration, 1)
	s.pace.after = func(d time.Duration) <-chan time.Time {
		stalls <- d
		return nil // the clock never moves: a wait lasts until its context ends
	}
	ctx := context.Background()
	before := s.pace.lim.TokensAt(s.pace.now())
	if err := sp.PayOutput(ctx, 10*outputBytesPerMS); err != nil {
		t.Fatal(err)
	}
	for range 2 * outputBytesPerMS / 1024 { // 2 ms of output in 1 KiB pieces
		if err := sp.PayOutput(ctx, 1024); err != nil {
			t.Fatal(err)
		}
	}
	if got := before - s.pace.lim.TokensAt(s.pace.now()); got != 12 {
		t.Errorf("10 ms of output and 2 ms in small pieces took %g tokens, want 12", got)
	}
	left := int(s.pace.lim.TokensAt(s.pace.now()))
	if err := sp.PayOutput(ctx, left*outputBytesPerMS); err != nil { // the rest of the burst, at once
		t.Fatal(err)
	}
	stalled, cancel := context.WithCancel(ctx)
	paid := make(chan error, 1)
	go func() { paid <- sp.PayOutput(stalled, outputBytesPerMS) }()
	select {
	case d := <-stalls:
		if d <= 0 {
			t.Errorf("the payment past the tokens waits %v, want a positive wait", d)
		}
	case err := <-paid:
		t.Fatalf("a payment past the session's tokens returned %v at once, want it to wait", err)
	case <-time.After(30 * time.Second):
		t.Fatal("a payment past the session's tokens neither waited nor returned")
	}
	select {
	case err := <-paid:
		t.Fatalf("a payment past the session's tokens returned %v before the clock moved, want it stalled", err)
	default:
	}
	cancel()
	if err := <-paid; !errors.Is(err, context.Canceled) {
		t.Errorf("the stalled payment, its context cancelled: got %v, want context.Canceled", err)
	}
	if got := s.pace.lim.TokensAt(s.pace.now()); got < -0.5 || got > 0.5 {
		t.Errorf("after the cancelled payment the pacer holds %g tokens, want 0 (given back)", got)
	}
}

// TestSpawnedKeepsSessionUsed: a running spawned process marks its
// session used at each tick, so a long command is not taken for idleness.
// The ticks are the test's own: an old last use with real ticks let the
// reaper end the session as idle before the first tick (a failure on a
// loaded machine).
func TestSpawnedKeepsSessionUsed(t *testing.T) {
	_, s, _, _ := spawnSession(t)
	p := &fakeProc{end: make(chan struct{})}
	tick := make(chan time.Time)
	ended := make(chan struct{})
	go func() {
		s.keepUsed(p, tick, func(err error) { t.Errorf("kill at the session's end: %v", err) })
		close(ended)
	}()
	for i := range 3 {
		old := time.Now().Add(-time.Hour)
		s.mu.Lock()
		s.lastUsed = old
		s.mu.Unlock()
		tick <- time.Now()
		tick <- time.Now() // taken once the first tick's mark is done
		if got := s.info().LastUsedAt; !got.After(old) {
			t.Errorf("tick %d: last used %v, want after %v", i, got, old)
		}
	}
	_ = p.Kill()
	<-ended
}

// termProc is a fakeProc that can be sent SIGTERM.
type termProc struct {
	fakeProc
	terminated bool
}

func (p *termProc) Terminate() error { p.terminated = true; return nil }

// TestSpawnedTerminate: Terminate sends SIGTERM where the box's process
// can take it, and kills it where it cannot.
func TestSpawnedTerminate(t *testing.T) {
	tp := &termProc{fakeProc: fakeProc{end: make(chan struct{})}}
	if err := (&Spawned{Process: tp}).Terminate(); err != nil || !tp.terminated || tp.killed {
		t.Errorf("with Terminate: err %v terminated %v killed %v, want SIGTERM alone", err, tp.terminated, tp.killed)
	}
	fp := &fakeProc{end: make(chan struct{})}
	if err := (&Spawned{Process: fp}).Terminate(); err != nil || !fp.killed {
		t.Errorf("without Terminate: err %v killed %v, want a kill", err, fp.killed)
	}
}

// TestPauseRefusedWhileSpawnStarts: a pause while a spawn waits for its
// box's start answer is refused (a frozen box could not give it), and
// allowed once the start is over.
func TestPauseRefusedWhileSpawnStarts(t *testing.T) {
	m, s, box, _ := spawnSession(t)
	ctx := context.Background()
	box.entered, box.hold = make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := m.Spawn(ctx, "alice", s.id, interp.Command{Argv: []string{"sleep", "9"}})
		done <- err
	}()
	<-box.entered
	if _, err := m.Pause(ctx, "alice", s.id); !errors.Is(err, ErrBusy) {
		t.Errorf("Pause() during a spawn's start = %v, want ErrBusy", err)
	}
	if box.isPaused() {
		t.Error("the refused pause stopped the box")
	}
	close(box.hold)
	if err := <-done; err != nil {
		t.Fatalf("Spawn() = %v", err)
	}
	if got, err := m.Pause(ctx, "alice", s.id); err != nil || got.State != StatePaused {
		t.Errorf("Pause() after the start = %+v, %v; want paused", got, err)
	}
	for _, p := range box.procs {
		_ = p.Kill()
	}
}
