package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
)

// fakeRuntime is a runtime whose pause and resume switch its state and
// then answer their err, as an engine that paused but timed out does; it
// records whether a call's context was already cancelled.
type fakeRuntime struct {
	paused              bool
	pauseErr, resumeErr error
	cancelled           bool
}

func (r *fakeRuntime) frame() Frame {
	return Frame{
		Pause: func(ctx context.Context) error {
			r.paused, r.cancelled = true, r.cancelled || ctx.Err() != nil
			return r.pauseErr
		},
		Resume: func(ctx context.Context) error {
			r.paused, r.cancelled = false, r.cancelled || ctx.Err() != nil
			return r.resumeErr
		},
	}
}

// TestRuntimePauseFailure: a runtime pause that fails is undone, so the
// box is known to run; when the undo fails too, or a resume fails, the
// error says the state is unknown and teardown resumes the box again.
// Neither call sees the caller's cancellation.
func TestRuntimePauseFailure(t *testing.T) {
	failed := errors.New("engine timed out")
	for _, tc := range []struct {
		name                string
		pauseErr, resumeErr error
		resume              bool
		wantUnknown         bool
	}{
		{name: "pause fails, undone", pauseErr: failed},
		{name: "pause and undo fail", pauseErr: failed, resumeErr: failed, wantUnknown: true},
		{name: "resume fails", resumeErr: failed, resume: true, wantUnknown: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &fakeRuntime{pauseErr: tc.pauseErr}
			if !tc.resume {
				r.resumeErr = tc.resumeErr
			}
			s := &Session{f: r.frame()}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := s.Pause(ctx)
			if tc.resume {
				if err != nil {
					t.Fatalf("Pause() = %v", err)
				}
				r.resumeErr = tc.resumeErr
				err = s.Resume(ctx)
			}
			if err == nil || errors.Is(err, ErrStateUnknown) != tc.wantUnknown {
				t.Errorf("got %v, want an error (unknown state: %v)", err, tc.wantUnknown)
			}
			if r.cancelled {
				t.Error("a runtime call got the caller's cancelled context")
			}
			if !tc.wantUnknown && r.paused {
				t.Error("the failed pause left the box paused")
			}
			if got := s.paused || s.unsure; got != tc.wantUnknown {
				t.Errorf("teardown would resume the box: %v, want %v", got, tc.wantUnknown)
			}
		})
	}
}

// TestWhilePaused: fn runs with the box paused and held so: a Resume and
// a Spawn tried meanwhile wait for it; a failed fn leaves the box running
// again; a saved one ends the session with ErrSaved.
func TestWhilePaused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		saved bool
		err   error
	}{
		{name: "fn fails", err: errors.New("copy failed")},
		{name: "fn saves", saved: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := attachFake(t)
			var inFn atomic.Bool
			resumedInFn := make(chan struct{}, 1)
			s.f.Resume = func(context.Context) error {
				if inFn.Load() {
					resumedInFn <- struct{}{}
				}
				return nil
			}
			var tried sync.WaitGroup
			err := s.WhilePaused(context.Background(), func() (bool, error) {
				inFn.Store(true)
				defer inFn.Store(false)
				tried.Add(2)
				cmd := devNullCommand(t) // its t.Fatal must run on the test's goroutine
				go func() { defer tried.Done(); _ = s.Resume(context.Background()) }()
				go func() { defer tried.Done(); _, _ = s.Spawn(context.Background(), cmd) }()
				// Give both a chance to run; neither may get through.
				for range 100 {
					runtime.Gosched()
				}
				time.Sleep(10 * time.Millisecond)
				if !s.paused {
					t.Errorf("the box is not paused inside fn")
				}
				if n := s.Running(); n != 1 {
					t.Errorf("Running() inside fn = %d, want 1: a Spawn got through", n)
				}
				return tc.saved, tc.err
			})
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Errorf("WhilePaused() = %v, want %v", err, tc.err)
			}
			select {
			case <-resumedInFn:
				t.Errorf("a Resume got through while fn ran")
			default:
			}
			if tc.saved {
				<-s.Done()
				if !errors.Is(s.Err(), ErrSaved) {
					t.Errorf("Err() = %v, want ErrSaved", s.Err())
				}
			} else if s.Paused() {
				t.Errorf("after a failed fn the box is paused, want it resumed")
			}
			if err := s.Close(); err != nil && !tc.saved {
				t.Errorf("Close() = %v", err)
			}
			tried.Wait()
		})
	}
}

// devNullCommand is sh with /dev/null for its stdio.
func devNullCommand(t *testing.T) interp.Command {
	t.Helper()
	var files []*os.File
	for range 3 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		files = append(files, f)
	}
	return interp.Command{Argv: []string{"sh"}, Files: files}
}

// TestWhilePausedUnknownState: an fn on a box paused before that fails
// with ErrStateUnknown (a checkpoint that could not keep the box paused)
// leaves the session unsure, so teardown treats it as maybe paused.
func TestWhilePausedUnknownState(t *testing.T) {
	r := &fakeRuntime{}
	s := &Session{f: r.frame(), done: make(chan struct{})}
	if err := s.Pause(context.Background()); err != nil {
		t.Fatalf("Pause() = %v", err)
	}
	lost := fmt.Errorf("%w: the box runs", ErrStateUnknown)
	if err := s.WhilePaused(context.Background(), func() (bool, error) { return false, lost }); !errors.Is(err, ErrStateUnknown) {
		t.Fatalf("WhilePaused() = %v, want ErrStateUnknown", err)
	}
	if !s.unsure {
		t.Error("after an fn that lost the box's state: unsure false, want true")
	}
}

// TestResumeToEndKillsPaused: teardown does not resume a paused box
// whose Kill ends it where it stands (Frame.KillsPaused), and still
// resumes one whose Kill does not.
func TestResumeToEndKillsPaused(t *testing.T) {
	for _, killsPaused := range []bool{true, false} {
		r := &fakeRuntime{}
		f := r.frame()
		f.KillsPaused = killsPaused
		s := &Session{f: f, done: make(chan struct{})}
		if err := s.Pause(context.Background()); err != nil {
			t.Fatalf("Pause() = %v", err)
		}
		if err := s.resumeToEnd(); err != nil {
			t.Fatalf("resumeToEnd() = %v", err)
		}
		if got, want := !r.paused, !killsPaused; got != want {
			t.Errorf("KillsPaused %v: teardown resumed the box: %v, want %v", killsPaused, got, want)
		}
		if s.paused || s.unsure {
			t.Errorf("KillsPaused %v: after resumeToEnd paused %v, unsure %v; want neither", killsPaused, s.paused, s.unsure)
		}
	}
}
