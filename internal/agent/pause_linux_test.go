package agent

import (
	"context"
	"errors"
	"testing"
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
