package sandbox

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// warmBackend is fakeBackend as a Warmer.
type warmBackend struct{ *fakeBackend }

func (warmBackend) WarmUp() []string { return []string{"/bin/warm"} }

// newWarmManager is a Manager over a warmBackend with a pool of size,
// whose refill for a taken box waits wait at most.
func newWarmManager(t *testing.T, size int, wait time.Duration) (*Manager, *fakeBackend) {
	t.Helper()
	old := refillWait
	refillWait = wait
	t.Cleanup(func() { refillWait = old })
	b := &fakeBackend{}
	m := NewManager(warmBackend{b}, Config{Pool: size})
	t.Cleanup(func() { m.Close() })
	// The pool holds a box only once its warm-up has run, after Start
	// counted it: wait on the pool, or Create may find it empty.
	waitFor(t, "the pool to fill", func() bool { return m.pool.held() == size })
	return m, b
}

// held is how many boxes p holds ready.
func (p *pool) held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.boxes)
}

// startCount is how many boxes f has built.
func (f *fakeBackend) startCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.starts
}

// TestPoolWarmsItsBoxes: a Warmer's pooled box has run the warm-up
// before it is handed out; a box built for a session that found the
// pool empty has not.
func TestPoolWarmsItsBoxes(t *testing.T) {
	m, _ := newWarmManager(t, 1, time.Hour)
	_, s := sessionOf(t, m, "alice")
	if got := s.box.(*fakeBox).ran.Argv; !slices.Equal(got, []string{"/bin/warm"}) {
		t.Errorf("pooled box ran %q before its session, want the warm-up [/bin/warm]", got)
	}
	cold, err := m.Create(context.Background(), "alice", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if s, err = m.lookupCtx(context.Background(), "alice", cold.ID); err != nil {
		t.Fatal(err)
	}
	if got := s.box.(*fakeBox).ran.Argv; got != nil {
		t.Errorf("a box built for its session ran %q before it, want nothing", got)
	}
}

// TestWarmPoolRefillsAfterFirstExec: the pool refills for a taken box
// once the box's first exec has ended, not before (the check before can
// only miss a refill that came late, never fail wrongly).
func TestWarmPoolRefillsAfterFirstExec(t *testing.T) {
	m, b := newWarmManager(t, 1, time.Hour)
	info, err := m.Create(context.Background(), "alice", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // ten times refillDelay
	if n := b.startCount(); n != 1 {
		t.Errorf("%d boxes built before the taken box's first exec, want 1 (the refill waits)", n)
	}
	if _, err := m.Exec(context.Background(), "alice", info.ID, ExecRequest{Command: []string{"true"}}, Stream{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refill after the first exec", func() bool { return b.startCount() == 2 })
}

// TestWarmPoolRefillsWithoutExec: a taken box that never execs holds the
// refill back refillWait at most, and a session's end before its first
// exec or a pooled one-shot run's end refills at once.
func TestWarmPoolRefillsWithoutExec(t *testing.T) {
	tests := []struct {
		name string
		wait time.Duration
		take func(*Manager) error
	}{
		{"session without exec", time.Millisecond, func(m *Manager) error {
			_, err := m.Create(context.Background(), "alice", defaultOptions())
			return err
		}},
		{"session deleted before its first exec", time.Hour, func(m *Manager) error {
			info, err := m.Create(context.Background(), "alice", defaultOptions())
			if err != nil {
				return err
			}
			return m.Delete(context.Background(), "alice", info.ID)
		}},
		{"pooled run", time.Hour, func(m *Manager) error {
			r, err := m.Run(context.Background(), "alice", defaultOptions(), ExecRequest{Command: []string{"echo", "pooled"}}, Stream{})
			if err == nil && r.Stdout != "echo pooled" {
				t.Errorf("run's stdout %q, want it run in the pooled box", r.Stdout)
			}
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, b := newWarmManager(t, 1, tt.wait)
			if err := tt.take(m); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the refill", func() bool { return b.startCount() == 2 })
		})
	}
}

// TestPoolWarmUpFails: a box whose warm-up fails is discarded, the pool
// reports why with a bounded stderr and backs off before it builds again
// (an hour here: the check can only miss a retry that came too early,
// never fail wrongly), and Close ends the pause.
func TestPoolWarmUpFails(t *testing.T) {
	old := retryFirst
	retryFirst = time.Hour
	t.Cleanup(func() { retryFirst = old })
	tests := []struct {
		name string
		fail spec.Result
		want string
	}{
		{"missing command", spec.Result{ExitCode: 127, Stderr: "no /bin/warm\nsecond line"}, `exit code 127, signal "", timed out false: no /bin/warm ...`},
		{"long stderr", spec.Result{ExitCode: 1, Stderr: strings.Repeat("x", 5000)}, strings.Repeat("x", warmStderrMax) + " ..."},
		{"killed", spec.Result{Signal: "killed"}, `signal "killed"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &fakeBackend{execFail: &tt.fail}
			errs := make(chan error, 10)
			m := NewManager(warmBackend{b}, Config{Pool: 1, OnPoolError: func(err error) {
				select {
				case errs <- err:
				default:
				}
			}})
			defer m.Close()
			var err error
			select {
			case err = <-errs:
			case <-time.After(time.Minute):
				t.Fatal("no pool error after a minute")
			}
			msg := err.Error()
			if !strings.Contains(msg, "warming up a pooled sandbox") || !strings.Contains(msg, tt.want) {
				t.Errorf("pool error %q, want the warm-up's failure with %q", msg, tt.want)
			}
			if len(msg) > warmStderrMax+200 {
				t.Errorf("pool error is %d bytes long, want its stderr cut", len(msg))
			}
			waitFor(t, "the failed box's discard", func() bool { return b.alive() == 0 })
			if n := b.startCount(); n != 1 {
				t.Errorf("%d boxes built right after the first failure, want 1 (the retry waits %v)", n, retryFirst)
			}
		})
	}
}

// TestPoolRetriesFailedWarmUp: the pool keeps retrying a failing warm-up
// after its pause.
func TestPoolRetriesFailedWarmUp(t *testing.T) {
	old := retryFirst
	retryFirst = time.Millisecond
	t.Cleanup(func() { retryFirst = old })
	b := &fakeBackend{execFail: &spec.Result{ExitCode: 127}}
	m := NewManager(warmBackend{b}, Config{Pool: 1})
	defer m.Close()
	waitFor(t, "three builds", func() bool { return b.startCount() >= 3 })
}

// TestRetryAfter: the pause after failed builds doubles from retryFirst
// up to retryMax.
func TestRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want time.Duration
	}{{1, retryFirst}, {2, 2 * retryFirst}, {3, 4 * retryFirst}, {7, retryMax}, {1000, retryMax}} {
		if got := retryAfter(tt.n); got != tt.want {
			t.Errorf("retryAfter(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

// TestRefillAfterClose: Close stops a taken box's pending refill timer,
// and the refill called after Close does nothing (without the pool's
// closed check it would send on the closed want channel and panic).
func TestRefillAfterClose(t *testing.T) {
	m, _ := newWarmManager(t, 1, time.Hour)
	box, ws, refill := m.pool.take(m.poolSpec)
	if box == nil {
		t.Fatal("the full pool handed out no box")
	}
	defer m.discardBox(box, ws)
	m.pool.mu.Lock()
	n := len(m.pool.pending)
	m.pool.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d refill timers pending after a take, want 1", n)
	}
	m.Close()
	m.pool.mu.Lock()
	n = len(m.pool.pending)
	m.pool.mu.Unlock()
	if n != 0 {
		t.Errorf("%d refill timers pending after Close, want 0", n)
	}
	refill()
	refill()
}
