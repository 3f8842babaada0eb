package gvisor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
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
