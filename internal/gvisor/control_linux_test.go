package gvisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeSentry listens on a socket in a test directory and answers one
// connection with serve, which gets the request the client sent; done is
// closed once that connection is closed.
func fakeSentry(t *testing.T, serve func(c *net.UnixConn, req string)) (sock string, done <-chan struct{}) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "s.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := l.AcceptUnix()
		if err != nil {
			return
		}
		defer c.Close() // the test's end of a fake connection
		if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			return
		}
		buf := make([]byte, 512)
		n, _ := c.Read(buf) // a short or failed read leaves req short, which the test sees
		serve(c, string(buf[:n]))
	}()
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("closing the fake sentry: %v", err)
		}
		<-served
	})
	return sock, served
}

// dialFake connects to a fake sentry (no peer check: the test is its
// peer) and makes one call within wait.
func dialFake(t *testing.T, sock string, wait time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLogged(slog.Default(), c)
	return exchange(ctx, c, sentryPause)
}

// replyWait bounds a fake sentry's call: short where it never answers
// (the row proves the call ends at its bound), and long enough for a
// loaded host where it does (no row may fail for a slow scheduler).
func replyWait(hang bool) time.Duration {
	if hang {
		return 300 * time.Millisecond
	}
	return 20 * time.Second
}

// TestExchangeHostileReplies: whatever the sentry answers (garbage, a
// huge reply, fields urpc has not, a reply that never comes, an early
// close), a call ends within its bound in a one-line error; only a
// proper urpc success counts, and a refusal is told apart.
func TestExchangeHostileReplies(t *testing.T) {
	huge := `{"success":true,"err":"` + strings.Repeat("a", 1<<20) + `"}`
	for _, tt := range []struct {
		name, reply string
		hang        bool
		want        string
		refused     bool
	}{
		{name: "success", reply: `{"success":true,"err":"","result":{}}`},
		{name: "null result", reply: `{"success":true,"err":"","result":null}`},
		{name: "refused", reply: `{"success":false,"err":"unknown method"}`, want: "unknown method", refused: true},
		{name: "long refusal", reply: `{"success":false,"err":"` + strings.Repeat("e", 3000) + `"}`, want: "...", refused: true},
		{name: "garbage", reply: "not json at all", want: "invalid character"},
		{name: "huge", reply: huge, want: "at most 4096 bytes"},
		{name: "unknown field", reply: `{"success":true,"err":"","result":{},"fd":3}`, want: "unknown field"},
		{name: "long unknown field", reply: `{"` + strings.Repeat("A", 4000) + `":1}`, want: "unknown field"},
		{name: "long refusal of many runes", reply: `{"success":false,"err":"x` + strings.Repeat("é", 1500) + `"}`, want: "...", refused: true},
		{name: "no success", reply: `{"err":""}`, want: "no success field"},
		{name: "odd result", reply: `{"success":true,"err":"","result":{"paused":false}}`, want: "unexpected result"},
		{name: "wrong type", reply: `{"success":"yes"}`, want: "cannot unmarshal"},
		{name: "early close", reply: "", want: "EOF"},
		{name: "no reply", hang: true, want: "i/o timeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			sock, _ := fakeSentry(t, func(c *net.UnixConn, req string) {
				if want := `{"method":"containerManager.Pause","arg":null}`; req != want {
					t.Errorf("request %q, want %q", req, want)
				}
				if tt.hang {
					<-release
					return
				}
				if _, err := io.WriteString(c, tt.reply); err != nil && !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
					t.Errorf("writing the reply: %v", err)
				}
			})
			err := dialFake(t, sock, replyWait(tt.hang))
			close(release)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("call: %v, want success", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("call: %v, want an error saying %q", err, tt.want)
			case errors.Is(err, errRefused) != tt.refused:
				t.Errorf("call: %v, refused %v, want %v", err, errors.Is(err, errRefused), tt.refused)
			case err != nil && (strings.Contains(err.Error(), "\n") || len(err.Error()) > 500):
				t.Errorf("error of %d bytes or lines, want one short line: %.600q", len(err.Error()), err)
			case errors.Is(err, errNotSent):
				t.Errorf("call: %v: the request was sent, want it not said otherwise", err)
			}
		})
	}
}

// TestExchangeDropsFiles: files the sentry passes with its reply are
// never taken: the process has no more descriptors after the call.
func TestExchangeDropsFiles(t *testing.T) {
	sock, served := fakeSentry(t, func(c *net.UnixConn, _ string) {
		f, err := os.Open("/dev/null")
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close() // read-only, opened only to be passed
		rights := unix.UnixRights(int(f.Fd()), int(f.Fd()), int(f.Fd()))
		if _, _, err := c.WriteMsgUnix([]byte(`{"success":true,"err":"","result":{}}`), rights, nil); err != nil {
			t.Errorf("writing the reply with files: %v", err)
		}
	})
	before := openFDs(t)
	if err := dialFake(t, sock, 5*time.Second); err != nil {
		t.Fatalf("call: %v", err)
	}
	<-served
	if after := openFDs(t); after > before {
		t.Errorf("the process has %d descriptors after a reply that passed 3, %d before: it took them", after, before)
	}
}

// openFDs counts the process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// TestCallSentryChecksPeer: a socket whose listener is not the box's
// sentry (here the test itself), and a socket that is not there, are
// never asked: the call fails as not sent.
func TestCallSentryChecksPeer(t *testing.T) {
	var asked atomic.Bool
	t.Cleanup(func() {
		if asked.Load() {
			t.Error("the fake sentry got a request")
		}
	})
	sock, _ := fakeSentry(t, func(_ *net.UnixConn, req string) { asked.Store(req != "") })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := callSentry(ctx, slog.Default(), sock, os.Getppid(), sentryPause)
	if !errors.Is(err, errNotSent) || !errors.Is(err, errBadPeer) || !strings.Contains(err.Error(), "is not the box's sentry") {
		t.Errorf("call to a socket the test listens on: %v, want not sent: not the box's sentry", err)
	}
	err = callSentry(ctx, slog.Default(), filepath.Join(t.TempDir(), "none.sock"), os.Getppid(), sentryPause)
	if !errors.Is(err, errNotSent) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("call to a missing socket: %v, want not sent: not there", err)
	}
}

// TestProbeReply: only urpc's exact answer to an unknown method, whole
// and in pieces, says the sentry speaks the pinned format; any other
// answer says it does not (errOtherFormat, one short line); an answer
// that does not come, or breaks off, says nothing yet.
func TestProbeReply(t *testing.T) {
	for _, tt := range []struct {
		name   string
		pieces []string
		hang   bool
		other  bool   // the error wraps errOtherFormat
		want   string // the error says so ("" for none)
	}{
		{name: "pinned urpc", pieces: []string{probeReply}},
		{name: "in pieces", pieces: []string{probeReply[:7], probeReply[7:30], probeReply[30:]}},
		{name: "no result field", pieces: []string{`{"success":false,"err":"unknown method"}`}, other: true, want: "not the pinned"},
		{name: "other error", pieces: []string{`{"success":false,"err":"no such method","result":null}`}, other: true, want: "no such"},
		{name: "success", pieces: []string{`{"success":true,"err":"","result":null}`}, other: true, want: "success"},
		{name: "garbage", pieces: []string{strings.Repeat("\x00", 5000)}, other: true, want: "unknown method"},
		{name: "broken off", pieces: []string{probeReply[:20]}, want: "EOF"},
		{name: "no answer", hang: true, want: "i/o timeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			sock, _ := fakeSentry(t, func(c *net.UnixConn, req string) {
				if want := `{"method":"warden.Probe","arg":null}`; req != want {
					t.Errorf("request %q, want %q", req, want)
				}
				if tt.hang {
					<-release
					return
				}
				for _, p := range tt.pieces {
					if _, err := io.WriteString(c, p); err != nil && !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
						t.Errorf("writing the answer: %v", err)
					}
					time.Sleep(time.Millisecond)
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), replyWait(tt.hang))
			defer cancel()
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer closeLogged(slog.Default(), c)
			err = exchange(ctx, c, sentryProbe)
			close(release)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("probe: %v, want the pinned urpc", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("probe: %v, want an error saying %q", err, tt.want)
			case errors.Is(err, errOtherFormat) != tt.other:
				t.Errorf("probe: %v, another format %v, want %v", err, errors.Is(err, errOtherFormat), tt.other)
			case err != nil && len(err.Error()) > 500:
				t.Errorf("error of %d bytes, want a short line", len(err.Error()))
			}
		})
	}
}

// TestTruncate: a cut string keeps whole runes and says it was cut.
func TestTruncate(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc..."},
		{"xéé", 2, "x..."},
		{"xéé", 3, "xé..."},
	} {
		if got := truncate(tt.s, tt.n); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

// keyedBox is a box of r whose runsc binary is bin and whose sentry is
// call (pauser.call); it starts nothing.
func keyedBox(r *Runtime, bin runscKey, call func(ctx context.Context, method string) error) *box {
	b := &box{r: r, runsc: bin.path, bin: bin, id: "keyed"}
	b.pz.call = call
	return b
}

// TestSpeaksControl: a probe's answer is kept by the runsc binary, so a
// second box of that binary is not probed again while another binary at
// the same path is; another format is kept for good, no answer for
// probeRetry, and a listener that is not the sentry fails the probe
// without keeping anything.
func TestSpeaksControl(t *testing.T) {
	old := runscKey{path: "/usr/local/lib/warden/runsc", ino: 1, size: 10}
	replaced := runscKey{path: old.path, ino: 2, size: 10}
	badPeer := fmt.Errorf("%w: %w, but pid 1 of uid 0", errNotSent, errBadPeer)
	for _, tt := range []struct {
		name    string
		answer  error
		speaks  bool
		badPeer bool
		probes  int32 // after two boxes of old and one of replaced
		retry   bool  // a kept "no" holds only for probeRetry
	}{
		{name: "pinned urpc", speaks: true, probes: 2},
		{name: "other format", answer: fmt.Errorf("%w: it answered %q", errOtherFormat, "?"), probes: 2},
		{name: "no answer", answer: errTimedOut, probes: 2, retry: true},
		{name: "bad peer", answer: badPeer, badPeer: true, probes: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &Runtime{}
			var probes atomic.Int32
			call := func(_ context.Context, method string) error {
				if method != sentryProbe {
					t.Errorf("called %s, want only the probe", method)
				}
				probes.Add(1)
				return tt.answer
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, b := range []*box{keyedBox(r, old, call), keyedBox(r, old, call), keyedBox(r, replaced, call)} {
				got, err := r.speaksControl(ctx, b)
				if got != tt.speaks || errors.Is(err, errBadPeer) != tt.badPeer || (err != nil) != tt.badPeer {
					t.Errorf("speaksControl(a box of %+v) = %v, %v; want %v, bad peer %v", b.bin, got, err, tt.speaks, tt.badPeer)
				}
			}
			if got := probes.Load(); got != tt.probes {
				t.Errorf("%d probes for two boxes of one binary and one of another at its path, want %d", got, tt.probes)
			}
			r.controlMu.Lock()
			defer r.controlMu.Unlock()
			for _, bin := range []runscKey{old, replaced} {
				p, kept := r.control[bin]
				switch {
				case kept == tt.badPeer:
					t.Errorf("probe of %+v kept %v (%+v), want %v", bin, kept, p, !tt.badPeer)
				case kept && (p.speaks != tt.speaks || !p.until.IsZero() != tt.retry || p.probing):
					t.Errorf("probe of %+v kept %+v, want speaks %v, a retry due %v, no probe under way", bin, p, tt.speaks, tt.retry)
				}
			}
		})
	}
}

// TestSpeaksControlAsksAgain: a "no" for want of an answer is asked
// again once probeRetry has passed, and the new answer kept.
func TestSpeaksControlAsksAgain(t *testing.T) {
	r := &Runtime{}
	bin := runscKey{path: "/fake/runsc", ino: 1}
	answers := []error{errTimedOut, nil}
	b := keyedBox(r, bin, func(context.Context, string) error {
		if len(answers) == 0 {
			t.Error("a probe past the two expected")
			return nil
		}
		a := answers[0]
		answers = answers[1:]
		return a
	})
	for i, want := range []bool{false, false, true, true} {
		if i == 2 {
			r.controlMu.Lock()
			r.control[bin] = controlProbe{until: time.Now().Add(-time.Second)}
			r.controlMu.Unlock()
		}
		if got, err := r.speaksControl(context.Background(), b); got != want || err != nil {
			t.Errorf("call %d: speaksControl() = %v, %v; want %v, nil", i, got, err, want)
		}
	}
	if len(answers) != 0 {
		t.Errorf("%d probes left unasked, want one probe before the retry and one after", len(answers))
	}
}

// TestSpeaksControlNoWait: while one box's probe of a binary is under
// way (held here until the test lets it go, whatever probeWait says),
// another box of that binary is told "no" at once, without waiting for
// it or probing, and nothing is kept for it; a box of another binary
// probes on its own meanwhile; the probe's answer is then kept for both
// boxes of its binary.
func TestSpeaksControlNoWait(t *testing.T) {
	r := &Runtime{}
	bin := runscKey{path: "/fake/runsc", ino: 1}
	other := runscKey{path: "/other/runsc", ino: 2}
	started, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(let)
	var probes atomic.Int32
	first := keyedBox(r, bin, func(context.Context, string) error {
		probes.Add(1)
		close(started)
		<-release
		return nil
	})
	count := func(context.Context, string) error { probes.Add(1); return nil }
	second, third := keyedBox(r, bin, count), keyedBox(r, other, count)
	type answer struct {
		speaks bool
		err    error
	}
	ask := func(b *box) <-chan answer {
		c := make(chan answer, 1)
		go func() {
			ok, err := r.speaksControl(context.Background(), b)
			c <- answer{ok, err}
		}()
		return c
	}
	// A caller that waited for the held probe would wait until the test
	// lets it go, so only a failing run pays this bound.
	const bound = 10 * time.Second
	firsts := ask(first)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first box's probe did not start within 10 s")
	}
	for _, tt := range []struct {
		b    *box
		want bool
	}{{second, false}, {third, true}} {
		select {
		case got := <-ask(tt.b):
			if got.speaks != tt.want || got.err != nil {
				t.Errorf("speaksControl(a box of %+v) during a probe of %+v = %v, %v; want %v, nil", tt.b.bin, bin, got.speaks, got.err, tt.want)
			}
		case <-time.After(bound):
			t.Fatalf("speaksControl(a box of %+v) waited over %v for another box's probe", tt.b.bin, bound)
		}
	}
	r.controlMu.Lock()
	held := r.control[bin]
	r.controlMu.Unlock()
	if !held.probing {
		t.Errorf("during the probe the binary's entry is %+v, want the probe under way, nothing kept for the box that did not wait", held)
	}
	let()
	if got := <-firsts; !got.speaks || got.err != nil {
		t.Errorf("speaksControl(the probing box) = %v, %v; want true, nil", got.speaks, got.err)
	}
	if got, err := r.speaksControl(context.Background(), second); !got || err != nil {
		t.Errorf("speaksControl(the box that did not wait) after the probe = %v, %v; want the kept true, nil", got, err)
	}
	if got := probes.Load(); got != 2 {
		t.Errorf("%d probes, want 2: one per binary", got)
	}
}

// TestSpeaksControlPanicReleases: a probe that panics leaves no "probe
// under way" behind, so the next box of the binary probes it again
// rather than taking "no" for the process's life.
func TestSpeaksControlPanicReleases(t *testing.T) {
	r := &Runtime{}
	bin := runscKey{path: "/fake/runsc", ino: 1}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the probe's panic did not come through")
			}
		}()
		_, _ = r.speaksControl(context.Background(), keyedBox(r, bin, func(context.Context, string) error { panic("probe") }))
	}()
	r.controlMu.Lock()
	p, kept := r.control[bin]
	r.controlMu.Unlock()
	if kept {
		t.Errorf("after a panicking probe the binary's entry is %+v, want none", p)
	}
	if got, err := r.speaksControl(context.Background(), keyedBox(r, bin, func(context.Context, string) error { return nil })); !got || err != nil {
		t.Errorf("speaksControl() after a panicking probe = %v, %v; want a new probe's true, nil", got, err)
	}
}
