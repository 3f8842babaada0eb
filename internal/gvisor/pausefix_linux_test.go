package gvisor

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestFailedRunscPauseResumes: a runsc pause that fails on a box it left
// running (here a cancelled context) does not leave the box recorded as
// runsc-paused, so the next resume works instead of failing on a
// running container for good.
func TestFailedRunscPauseResumes(t *testing.T) {
	requireRunsc(t)
	r := &Runtime{}
	sess := startBoxOn(t, r, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
	b := r.boxOf(sess)
	b.pz.mu.Lock()
	b.pz.noFreezer = true
	b.pz.noControl = true
	b.pz.mu.Unlock()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.pause(cancelled); err == nil {
		t.Fatal("runsc pause with a cancelled context succeeded")
	}
	if b.pz.runscPaused.Load() {
		t.Errorf("after a runsc pause that failed on a running box: runsc-paused true, want false")
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	if err := b.resume(ctx); err != nil {
		t.Errorf("resume after a failed runsc pause: %v", err)
	}
	run(t, sess, "true")
}

// TestFailedStillForSaveStaysPaused: a checkpoint of a frozen box whose
// runsc pause fails (its context ended) leaves the box paused, frozen
// again, and its session resumes it and runs a command.
func TestFailedStillForSaveStaysPaused(t *testing.T) {
	requireRunsc(t)
	r := &Runtime{Platform: freezablePlatform}
	sess := startBoxOn(t, r, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sess.Pause(ctx); err != nil {
		t.Fatalf("pause: %v", err)
	}
	requireFrozen(t, r, sess)
	b := r.boxOf(sess)
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := b.stillForSave(cancelled); err == nil {
		t.Fatal("stillForSave with a cancelled context succeeded")
	}
	if !b.pz.frozen.Load() || b.pz.runscPaused.Load() {
		t.Errorf("after a failed runsc pause for a save: frozen %v, runsc-paused %v; want frozen only", b.pz.frozen.Load(), b.pz.runscPaused.Load())
	}
	if err := sess.Resume(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if sess.Paused() {
		t.Error("the session says paused after a resume")
	}
	run(t, sess, "true")
}

// TestKillPausedBoxEndsItself: a kill of a paused box, frozen or runsc
// paused, ends it where it stands: a counter the box writes to its /tmp
// (on the host's scratch tmpfs) does not move on across the kill, runsc
// run ends by itself (not killed: forced false), and no warning is
// logged.
func TestKillPausedBoxEndsItself(t *testing.T) {
	requireRunsc(t)
	for _, how := range []string{"frozen", "runsc-paused", "sentry-paused"} {
		t.Run(how, func(t *testing.T) {
			frozen := how == "frozen"
			logs := &warnings{}
			r := &Runtime{Platform: freezablePlatform, Logger: slog.New(logs)}
			if how == "sentry-paused" {
				r.Platform = "systrap"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sess, err := r.Start(ctx, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
			if err != nil {
				t.Fatal(err)
			}
			b := r.boxOf(sess)
			b.pz.mu.Lock()
			b.pz.noFreezer = !frozen
			b.pz.noControl = how == "runsc-paused"
			b.pz.mu.Unlock()
			spawnQuiet(t, sess, "i=0; while [ $i -lt 100000000 ]; do i=$((i+1)); echo $i > /tmp/n; done")
			counter := filepath.Join(b.dir, "scratch", "tmp", "n")
			waitCounterMoves(t, counter)
			if err := sess.Pause(ctx); err != nil {
				t.Fatalf("pause: %v", err)
			}
			if frozen {
				requireFrozen(t, r, sess)
			}
			if got := b.pz.sentryPaused.Load(); got != (how == "sentry-paused") {
				t.Fatalf("sentry-paused %v after a pause meant to be %s", got, how)
			}
			before := readCounter(t, counter)
			b.kill()
			if after := readCounter(t, counter); after != before {
				t.Errorf("the paused box's counter moved from %q to %q across its kill: it ran again", before, after)
			}
			select {
			case <-b.exited:
			default:
				t.Error("runsc run has not returned after kill")
			}
			if b.forced {
				t.Error("runsc run was killed, want it to end by itself once its paused box was ended")
			}
			if err := sess.Close(); err != nil {
				t.Errorf("closing the killed box: %v", err)
			}
			logs.none(t)
		})
	}
}

// waitCounterMoves waits, for 20 s at most, until the host sees the
// file counter change, which shows the box's writes reach the host.
func waitCounterMoves(t *testing.T, counter string) {
	t.Helper()
	first := readCounter(t, counter)
	for range 200 {
		time.Sleep(100 * time.Millisecond)
		if readCounter(t, counter) != first {
			return
		}
	}
	t.Fatalf("the box's counter %s never moved on the host", counter)
}

// readCounter is the counter in file name, read again (100 times at
// most) while it is empty or has no newline yet: the box rewrites it.
func readCounter(t *testing.T, name string) string {
	t.Helper()
	var last []byte
	for range 100 {
		b, err := os.ReadFile(name)
		if err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
			return string(b)
		}
		last = b
		time.Sleep(time.Millisecond)
	}
	return string(last)
}

// TestCloseAfterCheckpoint: the box a checkpoint saved, running or
// paused (frozen) before, which a runsc of 2026 leaves paused after the
// save, closes with runsc run ending by itself and no warning.
func TestCloseAfterCheckpoint(t *testing.T) {
	requireRunsc(t)
	for _, paused := range []bool{false, true} {
		t.Run(map[bool]string{false: "running", true: "paused"}[paused], func(t *testing.T) {
			logs := &warnings{}
			r := &Runtime{Platform: freezablePlatform, Logger: slog.New(logs)}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sess, err := r.Start(ctx, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
			if err != nil {
				t.Fatal(err)
			}
			b := r.boxOf(sess)
			if paused {
				if err := sess.Pause(ctx); err != nil {
					t.Fatalf("pause: %v", err)
				}
			}
			if err := r.Checkpoint(ctx, sess, filepath.Join(t.TempDir(), "ckpt"), CheckpointOptions{}); err != nil {
				t.Fatalf("checkpoint: %v", err)
			}
			if err := sess.Close(); err != nil {
				t.Errorf("closing the checkpointed box: %v", err)
			}
			if b.forced {
				t.Error("runsc run was killed after the checkpoint, want it to end by itself")
			}
			logs.none(t)
		})
	}
}

// warnings is a slog.Handler that keeps the records at Warn and above.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnings) Handle(_ context.Context, rec slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	msg := rec.Message
	rec.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	w.msgs = append(w.msgs, msg)
	return nil
}

func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// none fails t for every warning kept.
func (w *warnings) none(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.msgs {
		t.Errorf("warning logged: %s", m)
	}
}

// TestPauseRestoredBox: a restored box pauses (frozen, or with runsc
// pause where its freeze stalls: seen with the 2026 runsc's background
// restore), resumes and runs a command, as a started one does; runsc
// once failed its pause ("loading container: file does not exist")
// until Restore waited for runsc's state running (awaitRestored).
func TestPauseRestoredBox(t *testing.T) {
	requireRunsc(t)
	for _, platform := range []string{freezablePlatform, "systrap"} {
		t.Run(platform, func(t *testing.T) {
			r := &Runtime{Platform: platform}
			s := spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}
			sess := startBoxOn(t, r, s)
			run(t, sess, "echo kept > /tmp/a")
			rs := restore(t, r, s, checkpoint(t, r, sess, CheckpointOptions{}))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := rs.Pause(ctx); err != nil {
				t.Fatalf("pausing the restored box: %v", err)
			}
			b := r.boxOf(rs)
			frozen, runscPaused, sentryPaused := b.pz.frozen.Load(), b.pz.runscPaused.Load(), b.pz.sentryPaused.Load()
			t.Logf("restored box paused: frozen %v, runsc-paused %v, sentry-paused %v", frozen, runscPaused, sentryPaused)
			if !frozen && !runscPaused && !sentryPaused {
				t.Fatal("the paused restored box is neither frozen nor runsc- nor sentry-paused")
			}
			if platform == "systrap" && !sentryPaused {
				t.Error("the restored systrap box was not paused by its sentry")
			}
			if err := rs.Resume(ctx); err != nil {
				t.Fatalf("resuming the restored box: %v", err)
			}
			if got := run(t, rs, "cat /tmp/a"); got != "kept" {
				t.Errorf("the restored box after a pause: got %q, want kept", got)
			}
		})
	}
}

// TestPauseOtherRunscs: on each runsc installed, a box the freezer does
// not take pauses through its sentry where that runsc makes its control
// socket in its --root (the pinned one), and with runsc pause where it
// does not (Debian's, whose socket is abstract), and resumes either way.
func TestPauseOtherRunscs(t *testing.T) {
	requireRunsc(t)
	for _, tt := range []struct {
		name, runsc string
	}{{"pinned", ""}, {"debian", "/usr/bin/runsc"}} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.runsc != "" {
				if _, err := os.Stat(tt.runsc); err != nil {
					t.Skip("no " + tt.runsc)
				}
			}
			r := &Runtime{Runsc: tt.runsc, Platform: freezablePlatform}
			sess := startBoxOn(t, r, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
			b := r.boxOf(sess)
			b.pz.mu.Lock()
			b.pz.noFreezer = true
			b.pz.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := sess.Pause(ctx); err != nil {
				t.Fatalf("pause: %v", err)
			}
			_, statErr := os.Stat(controlSocket(b.id))
			sentry, runsc := b.pz.sentryPaused.Load(), b.pz.runscPaused.Load()
			t.Logf("control socket in --root: %v; sentry-paused %v, runsc-paused %v", statErr == nil, sentry, runsc)
			if sentry == runsc || sentry != (statErr == nil) {
				t.Errorf("sentry-paused %v, runsc-paused %v with the socket there %v; want the sentry's pause exactly where the socket is", sentry, runsc, statErr == nil)
			}
			if err := sess.Resume(ctx); err != nil {
				t.Fatalf("resume: %v", err)
			}
			run(t, sess, "true")
		})
	}
}
