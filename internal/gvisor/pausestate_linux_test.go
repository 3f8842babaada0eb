package gvisor

import (
	"golang.org/x/sys/unix"

	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
)

// scriptedSentry stands for a box's sentry (pauser.call): each call of a
// method takes the next of its answers (nil once they run out) and is
// recorded.
type scriptedSentry struct {
	mu      sync.Mutex
	answers map[string][]error
	calls   []string
}

func (s *scriptedSentry) call(_ context.Context, method string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, method)
	if a := s.answers[method]; len(a) > 0 {
		s.answers[method] = a[1:]
		return a[0]
	}
	return nil
}

// count is how many times method was called.
func (s *scriptedSentry) count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c == method {
			n++
		}
	}
	return n
}

// scriptedRunsc writes a runsc whose pause and resume exit with the
// status in dir's pause.rc and resume.rc (0 without), whose state prints
// dir's state file (and fails without one), and which records each
// command in dir's calls file.
func scriptedRunsc(t *testing.T) (runsc, dir string) {
	t.Helper()
	dir = t.TempDir()
	script := `#!/bin/sh
d="` + dir + `"
for a; do case "$a" in pause|resume|state) cmd="$a"; break;; esac; done
echo "$cmd" >> "$d/calls"
if [ "$cmd" = state ]; then exec cat "$d/state"; fi
[ -f "$d/$cmd.rc" ] && exit "$(cat "$d/$cmd.rc")"
exit 0
`
	runsc = filepath.Join(dir, "runsc")
	if err := os.WriteFile(runsc, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return runsc, dir
}

// runscCalls are the commands the scripted runsc in dir ran.
func runscCalls(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "calls"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// writeScript writes the scripted runsc's file name in dir.
func writeScript(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// scriptedBox is a box on the systrap platform (never frozen) whose
// sentry is s and whose runsc is a scripted one in the returned dir.
func scriptedBox(t *testing.T, r *Runtime, s *scriptedSentry) (*box, string) {
	t.Helper()
	runsc, dir := scriptedRunsc(t)
	bin, err := runscKeyOf(runsc)
	if err != nil {
		t.Fatal(err)
	}
	b := &box{r: r, runsc: runsc, bin: bin, id: "scripted"}
	b.pz.call = s.call
	return b, dir
}

// sessionPause pauses b as agent.Session.runtimePause does: a pause that
// fails is undone by a resume, and an undo that fails too leaves the
// state unknown.
func sessionPause(ctx context.Context, b *box) error {
	err := b.pause(ctx)
	if err == nil {
		return nil
	}
	if rerr := b.resume(ctx); rerr != nil {
		return fmt.Errorf("%w: pausing: %w; resuming again: %w", agent.ErrStateUnknown, err, rerr)
	}
	return err
}

// pauseTwiceRefused pauses b twice: the first must fail for a listener
// that is not the box's sentry, as a box that cannot pause; the second's
// error is the step's.
func pauseTwiceRefused(ctx context.Context, b *box) error {
	err := sessionPause(ctx, b)
	if err == nil {
		return errors.New("the first pause worked, want the listener refused")
	}
	if !errors.Is(err, errBadPeer) || !errors.Is(err, agent.ErrCannotPause) {
		return fmt.Errorf("first pause: %w, want the listener refused as a box that cannot pause", err)
	}
	return sessionPause(ctx, b)
}

// errTimedOut is an answer that leaves a call's outcome unknown: sent, and
// no reply in time.
var errTimedOut = fmt.Errorf("reading the sentry's reply: %w", os.ErrDeadlineExceeded)

// TestSentryPauseFailures drives a box's pause, resume and checkpoint
// conversion through a sentry and a runsc that fail in scripted ways: a
// refused or unsent pause falls back to runsc pause; a listener that is
// not the sentry fails every pause without runsc; a pause or resume the
// sentry may or may not have done (no reply) is never followed by
// another resume, and leaves the state unknown (the session ends the box);
// a checkpoint undoes the sentry's pause only once runsc surely paused
// the box. A box that fails for its listener says it cannot pause
// (agent.ErrCannotPause), which the session layer answers as such.
func TestSentryPauseFailures(t *testing.T) {
	badPeer := fmt.Errorf("%w: %w, but pid 1 of uid 0", errNotSent, errBadPeer)
	for _, tt := range []struct {
		name    string
		answers map[string][]error
		runsc   map[string]string // the scripted runsc's files
		steps   func(ctx context.Context, b *box) error
		unknown bool     // the steps' error wraps agent.ErrStateUnknown
		cannot  bool     // the steps' error wraps agent.ErrCannotPause
		wantErr string   // the steps' error says so ("" for none)
		resumes int      // resumes the sentry got
		pauses  int      // pauses the sentry got
		runscs  []string // commands runsc ran
		flags   string   // pauser flags after the steps
	}{{
		name:    "refused pause falls back to runsc",
		answers: map[string][]error{sentryPause: {fmt.Errorf("%w: unknown method", errRefused)}},
		steps: func(ctx context.Context, b *box) error {
			return errors.Join(sessionPause(ctx, b), b.resume(ctx), sessionPause(ctx, b))
		},
		pauses: 1, runscs: []string{"pause", "resume", "pause"}, flags: "runsc noControl",
	}, {
		name:    "unsent pause falls back to runsc",
		answers: map[string][]error{sentryPause: {fmt.Errorf("%w: connecting: refused", errNotSent)}},
		steps:   func(ctx context.Context, b *box) error { return sessionPause(ctx, b) },
		pauses:  1, runscs: []string{"pause"}, flags: "runsc",
	}, {
		name:    "pause with lost reply is never resumed",
		answers: map[string][]error{sentryPause: {errTimedOut}},
		steps: func(ctx context.Context, b *box) error {
			return errors.Join(sessionPause(ctx, b), b.resume(ctx))
		},
		unknown: true, wantErr: "did not answer", pauses: 1, flags: "sentry inDoubt",
	}, {
		name:    "failed sentry resume is not sent again",
		answers: map[string][]error{sentryResume: {errTimedOut}},
		steps: func(ctx context.Context, b *box) error {
			return errors.Join(sessionPause(ctx, b), b.resume(ctx), b.resume(ctx))
		},
		unknown: true, pauses: 1, resumes: 1, flags: "sentry inDoubt",
	}, {
		name:    "unsent sentry resume is sent again",
		answers: map[string][]error{sentryResume: {fmt.Errorf("%w: connecting: refused", errNotSent)}},
		steps: func(ctx context.Context, b *box) error {
			if err := sessionPause(ctx, b); err != nil {
				return err
			}
			if err := b.resume(ctx); err == nil {
				return errors.New("a resume that was not sent worked")
			}
			return b.resume(ctx)
		},
		pauses: 1, resumes: 2,
	}, {
		name:    "failed checkpoint conversion, runsc state unreadable, keeps the box paused",
		runsc:   map[string]string{"pause.rc": "1"},
		steps:   pauseThenConvert,
		wantErr: "stays paused through its sentry", pauses: 1, runscs: []string{"pause", "state"}, flags: "runsc sentry",
	}, {
		name:    "failed checkpoint conversion, runsc state running, keeps the box paused",
		runsc:   map[string]string{"pause.rc": "1", "state": `{"status":"running"}`},
		steps:   pauseThenConvert,
		wantErr: "stays paused through its sentry", pauses: 1, runscs: []string{"pause", "state"}, flags: "sentry",
	}, {
		name:   "failed runsc pause whose state says paused converts",
		runsc:  map[string]string{"pause.rc": "1", "state": `{"status":"paused"}`},
		steps:  pauseThenConvert,
		pauses: 1, resumes: 1, runscs: []string{"pause", "state"}, flags: "runsc",
	}, {
		name:    "checkpoint conversion's resume in doubt is never sent twice",
		answers: map[string][]error{sentryResume: {errTimedOut}},
		steps: func(ctx context.Context, b *box) error {
			err := pauseThenConvert(ctx, b)
			if !errors.Is(err, agent.ErrStateUnknown) {
				return fmt.Errorf("conversion: %w, want a state unknown", err)
			}
			return b.resume(ctx)
		},
		unknown: true, pauses: 1, resumes: 1, runscs: []string{"pause"}, flags: "runsc sentry inDoubt",
	}, {
		name:    "listener that is not the sentry fails every pause, without runsc",
		answers: map[string][]error{sentryPause: {badPeer, badPeer}},
		steps:   pauseTwiceRefused,
		wantErr: "is not the box's sentry", cannot: true, pauses: 1, flags: "badPeer",
	}, {
		name:    "listener the probe finds is not the sentry fails every pause, without runsc",
		answers: map[string][]error{sentryProbe: {badPeer}},
		steps:   pauseTwiceRefused,
		wantErr: "is not the box's sentry", cannot: true, flags: "badPeer",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			s := &scriptedSentry{answers: tt.answers}
			b, dir := scriptedBox(t, &Runtime{Platform: "systrap"}, s)
			for name, text := range tt.runsc {
				writeScript(t, dir, name, text)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := tt.steps(ctx, b)
			switch {
			case tt.wantErr == "" && !tt.unknown && err != nil:
				t.Errorf("steps: %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("steps: %v, want an error saying %q", err, tt.wantErr)
			case errors.Is(err, agent.ErrStateUnknown) != tt.unknown:
				t.Errorf("steps: %v, state unknown %v, want %v", err, errors.Is(err, agent.ErrStateUnknown), tt.unknown)
			case errors.Is(err, agent.ErrCannotPause) != tt.cannot:
				t.Errorf("steps: %v, cannot pause %v, want %v", err, errors.Is(err, agent.ErrCannotPause), tt.cannot)
			}
			if got := s.count(sentryPause); got != tt.pauses {
				t.Errorf("the sentry got %d pauses, want %d (calls %v)", got, tt.pauses, s.calls)
			}
			if got := s.count(sentryResume); got != tt.resumes {
				t.Errorf("the sentry got %d resumes, want %d (calls %v)", got, tt.resumes, s.calls)
			}
			if got := runscCalls(t, dir); !slices.Equal(got, tt.runscs) {
				t.Errorf("runsc ran %q, want %q", got, tt.runscs)
			}
			if got := pauserFlags(b); got != tt.flags {
				t.Errorf("pauser flags %q, want %q", got, tt.flags)
			}
		})
	}
}

// pauseThenConvert pauses b through its sentry, then turns that pause
// into a runsc pause for a save, as a checkpoint of a paused box does.
func pauseThenConvert(ctx context.Context, b *box) error {
	if err := sessionPause(ctx, b); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	if !b.pz.sentryPaused.Load() {
		return errors.New("the box did not pause through its sentry")
	}
	return b.stillForSave(ctx)
}

// pauserFlags names the pauser's flags that are set, in a fixed order.
func pauserFlags(b *box) string {
	b.pz.mu.Lock()
	defer b.pz.mu.Unlock()
	var f []string
	for _, x := range []struct {
		name string
		on   bool
	}{
		{"frozen", b.pz.frozen.Load()}, {"runsc", b.pz.runscPaused.Load()}, {"sentry", b.pz.sentryPaused.Load()},
		{"inDoubt", b.pz.inDoubt}, {"badPeer", b.pz.badPeer != nil}, {"noControl", b.pz.noControl},
		{"pausing", b.pz.pausing.Load()},
	} {
		if x.on {
			f = append(f, x.name)
		}
	}
	return strings.Join(f, " ")
}

// TestProbeOncePerRunsc: the first pause of a runsc binary's boxes
// probes its sentry, and the answer holds for every box of that binary:
// one that speaks the pinned urpc pauses through its sentry; one that
// answers otherwise pauses with runsc pause, with no further probe; one
// that gave no answer is probed again only after probeRetry.
func TestProbeOncePerRunsc(t *testing.T) {
	for _, tt := range []struct {
		name   string
		probe  error
		probes int    // probes after two boxes paused
		flags  string // of each box after its pause
		retry  bool   // a later probe is due
	}{
		{name: "pinned urpc", probes: 1, flags: "sentry"},
		{name: "other format", probe: fmt.Errorf("%w: it answered %q", errOtherFormat, "?"), probes: 1, flags: "runsc"},
		{name: "no answer", probe: errTimedOut, probes: 1, flags: "runsc", retry: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &Runtime{Platform: "systrap"}
			s := &scriptedSentry{answers: map[string][]error{sentryProbe: {tt.probe, tt.probe}}}
			first, _ := scriptedBox(t, r, s)
			second, _ := scriptedBox(t, r, s)
			second.runsc, second.bin = first.runsc, first.bin
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i, b := range []*box{first, second} {
				if err := sessionPause(ctx, b); err != nil {
					t.Fatalf("pause of box %d: %v", i, err)
				}
				if got := pauserFlags(b); got != tt.flags {
					t.Errorf("box %d: pauser flags %q, want %q", i, got, tt.flags)
				}
			}
			if got := s.count(sentryProbe); got != tt.probes {
				t.Errorf("%d probes for two boxes of one runsc, want %d", got, tt.probes)
			}
			r.controlMu.Lock()
			p := r.control[first.bin]
			r.controlMu.Unlock()
			if due := !p.until.IsZero(); due != tt.retry {
				t.Errorf("a later probe due %v (until %v), want %v", due, p.until, tt.retry)
			}
		})
	}
}

// TestRunscPauseLooksAtListener: before a runsc pause the box's sentry
// was not asked for (its binary's probe under way in another box,
// another format, a probe's "no" for a while, no control socket seen
// before), the box's control socket is connected to and its listener
// checked, with nothing sent: a socket not there goes on to runsc pause;
// a listener that is not the box's sentry (the test itself here) fails
// the pause as a box that cannot pause, with no runsc pause, and so does
// every later pause.
func TestRunscPauseLooksAtListener(t *testing.T) {
	for _, why := range []struct {
		name  string
		known *controlProbe // the binary's entry, if any
		noCtl bool          // the box saw no control socket before
	}{
		{name: "probe under way", known: &controlProbe{probing: true}},
		{name: "other format", known: &controlProbe{}},
		{name: "no answer for a while", known: &controlProbe{until: time.Now().Add(time.Hour)}},
		{name: "no control socket before", noCtl: true},
	} {
		for _, sock := range []struct {
			name    string
			listen  bool
			bound   func(t *testing.T, path string) // makes a socket there that is not a listening sentry
			runscs  []string
			badPeer bool
			fails   bool // the pause fails, nothing done, the box still pausable
		}{
			{name: "socket not there", runscs: []string{"pause"}},
			{name: "socket with no listener", bound: boundNotListening, runscs: []string{"pause"}},
			{name: "listener not the sentry", listen: true, badPeer: true},
			{name: "listener whose queue is full", bound: fullListener, fails: true},
		} {
			t.Run(why.name+"/"+sock.name, func(t *testing.T) {
				r := &Runtime{Platform: "systrap"}
				s := &scriptedSentry{}
				b, dir := scriptedBox(t, r, s)
				run, err := os.FindProcess(os.Getpid()) // no listener here is its runsc-sandbox child
				if err != nil {
					t.Fatal(err)
				}
				b.cmd = &exec.Cmd{Process: run}
				b.pz.noControl = why.noCtl
				if why.known != nil {
					r.control = map[runscKey]controlProbe{b.bin: *why.known}
				}
				b.pz.sock = filepath.Join(t.TempDir(), "none.sock")
				if sock.listen {
					var asked atomic.Bool
					t.Cleanup(func() {
						if asked.Load() {
							t.Error("the listener got a request")
						}
					})
					b.pz.sock, _ = fakeSentry(t, func(_ *net.UnixConn, req string) { asked.Store(req != "") })
				}
				if sock.bound != nil {
					sock.bound(t, b.pz.sock)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				err = b.pause(ctx)
				if sock.badPeer != (errors.Is(err, errBadPeer) && errors.Is(err, agent.ErrCannotPause)) || (err != nil) != (sock.badPeer || sock.fails) {
					t.Errorf("pause() = %v, want a box that cannot pause %v, a failed pause %v", err, sock.badPeer, sock.fails)
				}
				if sock.fails && (b.pz.badPeer != nil || b.pz.inDoubt || b.pz.sentryPaused.Load()) {
					t.Errorf("after a look that could not be made: badPeer %v, inDoubt %v, sentryPaused %v; want the box as it was", b.pz.badPeer, b.pz.inDoubt, b.pz.sentryPaused.Load())
				}
				if sock.badPeer {
					if again := b.pause(ctx); !errors.Is(again, agent.ErrCannotPause) {
						t.Errorf("second pause() = %v, want it refused too", again)
					}
				}
				if got := runscCalls(t, dir); !slices.Equal(got, sock.runscs) {
					t.Errorf("runsc ran %q, want %q", got, sock.runscs)
				}
				if len(s.calls) != 0 {
					t.Errorf("the sentry was asked %q, want nothing", s.calls)
				}
			})
		}
	}
}

// boundNotListening makes a unix socket at path that is bound but does
// not listen: a connect to it is refused (ECONNREFUSED), as to a stale
// socket whose sentry is gone.
func boundNotListening(t *testing.T, path string) {
	t.Helper()
	fd := unixSocketAt(t, path)
	t.Cleanup(func() { unix.Close(fd) })
}

// fullListener makes a unix socket at path that listens with a backlog
// of 0 and fills that backlog with one connection no one accepts: a
// further connect fails at once (EAGAIN), so its listener cannot be
// looked at.
func fullListener(t *testing.T, path string) {
	t.Helper()
	fd := unixSocketAt(t, path)
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("filling the listener's queue: %v", err)
	}
	t.Cleanup(func() { c.Close() })
}

// unixSocketAt is a unix stream socket bound at path.
func unixSocketAt(t *testing.T, path string) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		t.Fatalf("binding %s: %v", path, err)
	}
	return fd
}
