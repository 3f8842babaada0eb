package docker

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// bound is how long a test waits for what should happen at once; it
// only fails a broken build, never paces a working one.
const bound = 20 * time.Second

// listen is the control socket of b, as start makes it.
func listen(t *testing.T, b *box) (*net.UnixListener, string) {
	t.Helper()
	sock := filepath.Join(b.dir, "ctl.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, sock
}

// dialer is an init that connects to sock once its container starts;
// the connection stays open until the test ends.
func dialer(t *testing.T, sock string) func() {
	return func() {
		c, err := net.Dial("unix", sock)
		if err != nil {
			return // the listener closed first: the box failed already
		}
		t.Cleanup(func() { c.Close() })
	}
}

// launchedBox is a box launched on a fresh memEngine whose container's
// init is this process dialling the control socket, for the tests of
// what follows a launch; name is the case's, for the failure message.
func launchedBox(t *testing.T, name string) (*memEngine, *box) {
	t.Helper()
	f := newMemEngine()
	b := testBox(t, f, "")
	ln, sock := listen(t, b)
	f.pid, f.onStart = os.Getpid(), dialer(t, sock)
	if err := b.launch(context.Background(), ContainerConfig{}, func() error { return nil }, ln); err != nil {
		t.Fatalf("%s: launch: %v", name, err)
	}
	return f, b
}

// cleanupBounded runs b.cleanup as Start does after a failure (or the
// session after its end) and fails the test if it does not return.
func cleanupBounded(t *testing.T, b *box) {
	t.Helper()
	if b.ctl != nil {
		b.ctl.Close()
	}
	done := make(chan struct{})
	go func() { b.cleanup(); close(done) }()
	select {
	case <-done:
	case <-time.After(bound):
		t.Fatalf("cleanup did not return in %v", bound)
	}
}

// TestLaunchCleansUpEachStep: whichever step of a start fails, the error
// names it, the init's lease is released, and the box's cleanup leaves no
// container and no directory behind; a start that succeeds is cleaned up
// the same way.
func TestLaunchCleansUpEachStep(t *testing.T) {
	errEngine := errors.New("engine says no")
	tests := []struct {
		name    string
		setup   func(f *memEngine, sock string)
		release error
		cancel  bool
		want    string // "" means launch succeeds
		created bool
	}{
		{"create fails", func(f *memEngine, _ string) { f.setFail("Create", errEngine) }, nil, false, "creating the container: engine says no", false},
		{"start fails", func(f *memEngine, _ string) { f.setFail("Start", errEngine) }, nil, false, "starting the container: engine says no", true},
		{"lease release fails", nil, errors.New("unlock"), false, "releasing", true},
		{"dies before its init connects", func(f *memEngine, _ string) { f.onStart = func() { f.die("c1") } }, nil, false, "waiting for the container's init", true},
		{"start cancelled", nil, nil, true, "waiting for the container's init", true},
		{"another process connects", func(f *memEngine, sock string) { f.pid = os.Getpid() + 1; f.onStart = dialer(t, sock) }, nil, false, "not the container's init", true},
		{"inspect fails", func(f *memEngine, sock string) { f.setFail("Pid", errEngine); f.onStart = dialer(t, sock) }, nil, false, "asking the engine for the container's pid to check the control socket's peer: engine says no", true},
		{"init connects", func(f *memEngine, sock string) { f.pid = os.Getpid(); f.onStart = dialer(t, sock) }, nil, false, "", true},
	}
	for _, tt := range tests {
		f := newMemEngine()
		b := testBox(t, f, "")
		ln, sock := listen(t, b)
		if tt.setup != nil {
			tt.setup(f, sock)
		}
		// No deadline: a box that died must end the wait for its init by
		// itself, not by ctx or the accept's own timeout.
		ctx, cancel := context.WithCancel(context.Background())
		if tt.cancel {
			cancel()
		}
		released := false
		var err error
		done := make(chan struct{})
		go func() {
			err = b.launch(ctx, ContainerConfig{Image: "img"}, func() error { released = true; return tt.release }, ln)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(bound):
			cancel()
			<-done
			t.Errorf("%s: launch still waiting after %v", tt.name, bound)
		}
		cancel()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: launch = %v, want an error containing %q", tt.name, err, tt.want)
		}
		if tt.want == "" && b.ctl == nil {
			t.Errorf("%s: launch succeeded with no control connection", tt.name)
		}
		if !released {
			t.Errorf("%s: the init's lease was not released", tt.name)
		}
		if got := f.count("Create") == 1 && b.id != ""; got != tt.created {
			t.Errorf("%s: container created = %v, want %v", tt.name, got, tt.created)
		}
		cleanupBounded(t, b)
		if left := f.left(); len(left) > 0 {
			t.Errorf("%s: containers left after cleanup: %v (calls %v)", tt.name, left, f.calls)
		}
		if _, err := os.Stat(b.dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the box's directory is left after cleanup (stat: %v)", tt.name, err)
		}
	}
}

// TestCleanupGoesOnPastFailures: a failed step of the cleanup does not
// stop the others: failing to read the logs still removes the container,
// and failing to remove it still ends the watch and removes the box's
// directory.
func TestCleanupGoesOnPastFailures(t *testing.T) {
	tests := []struct {
		name, fail string
		wantLeft   int
	}{
		{"logs fail", "Logs", 0},
		{"remove fails", "Remove", 1},
	}
	for _, tt := range tests {
		f, b := launchedBox(t, tt.name)
		f.setFail(tt.fail, errors.New(tt.fail+" failed"))
		b.keepLogs = true
		cleanupBounded(t, b)
		if f.count("Remove") != 1 {
			t.Errorf("%s: Remove called %d times, want 1 (calls %v)", tt.name, f.count("Remove"), f.calls)
		}
		if got := len(f.left()); got != tt.wantLeft {
			t.Errorf("%s: %d containers left, want %d", tt.name, got, tt.wantLeft)
		}
		select {
		case <-b.exited:
		default:
			t.Errorf("%s: the box is not marked ended after its cleanup", tt.name)
		}
		if _, err := os.Stat(b.dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the box's directory is left after cleanup (stat: %v)", tt.name, err)
		}
	}
}

// TestWatchSeesTheContainerEnd: a container that dies mid-session, or
// that the engine removes, marks the box ended, which ends its session,
// and the box says how, in the words and exit code the session turns
// into its error (nsinit.EndedCause); a watch stopped while the
// container runs (the box's cleanup) ends it without inventing a cause.
func TestWatchSeesTheContainerEnd(t *testing.T) {
	tests := []struct {
		name      string
		end       func(f *memEngine, b *box)
		wantHow   string
		wantCode  int
		wantCause error
	}{
		{"watch stopped", func(_ *memEngine, b *box) { b.stopWatch() }, "the engine did not say how", -1, nil},
		{"killed", func(f *memEngine, b *box) { f.die(b.id) }, "signal: killed", -1, nil},
		{"its code killed the agent", func(f *memEngine, b *box) { f.exit(b.id, nsinit.ExitUserAgentDied) },
			"exit status 113", nsinit.ExitUserAgentDied, nsinit.ErrAgentKilled},
		{"exits", func(f *memEngine, b *box) { f.exit(b.id, 0) }, "exit status 0", 0, nil},
		{"removed behind Warden's back", func(f *memEngine, b *box) {
			if err := f.Remove(context.Background(), b.id); err != nil {
				t.Errorf("removing the container: %v", err)
			}
		}, "signal: killed", -1, nil},
	}
	for _, tt := range tests {
		f, b := launchedBox(t, tt.name)
		f.awaitWaiting(t, 1)
		tt.end(f, b)
		select {
		case <-b.exited:
		case <-time.After(bound):
			t.Fatalf("%s: the box is not marked ended after %v", tt.name, bound)
		}
		how, code := b.ended(), b.exitCode()
		if how != tt.wantHow || code != tt.wantCode || !errors.Is(nsinit.EndedCause(code), tt.wantCause) {
			t.Errorf("%s: ended %q, exit code %d (cause %v), want %q, %d (%v)", tt.name, how, code,
				nsinit.EndedCause(code), tt.wantHow, tt.wantCode, tt.wantCause)
		}
		cleanupBounded(t, b)
	}
}

// TestWatchOfAContainerTheEngineLost: a container the engine no longer
// knows counts as ended at once, with no word on how.
func TestWatchOfAContainerTheEngineLost(t *testing.T) {
	f := newMemEngine()
	b := testBox(t, f, "")
	b.id = "gone"
	done := make(chan struct{})
	go func() { b.watch(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(bound):
		t.Fatalf("watch of a container the engine does not know still waits after %v", bound)
	}
	select {
	case <-b.exited:
	default:
		t.Errorf("the box is not marked ended")
	}
	if how, code := b.ended(), b.exitCode(); how != "the engine did not say how" || code != -1 {
		t.Errorf("ended %q, exit code %d, want %q, -1", how, code, "the engine did not say how")
	}
	if n := f.count("Wait"); n != 1 {
		t.Errorf("Wait called %d times, want 1: a lost container is not waited for again", n)
	}
}

// TestKillFallsBackToTheEngine: a box whose container has ended is not
// killed again; one that outlives the grace after its control connection
// shuts is killed by the engine.
func TestKillFallsBackToTheEngine(t *testing.T) {
	tests := []struct {
		name     string
		ended    bool
		wantKill int
	}{
		{"already ended", true, 0},
		{"ignores the shutdown", false, 1},
	}
	for _, tt := range tests {
		f, b := launchedBox(t, tt.name)
		if tt.ended {
			f.die(b.id)
			<-b.exited
		}
		b.kill()
		if got := f.count("Kill"); got != tt.wantKill {
			t.Errorf("%s: engine Kill called %d times, want %d", tt.name, got, tt.wantKill)
		}
		cleanupBounded(t, b)
	}
}
