package agent

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// testWait bounds every wait in these tests; none asserts on timing.
const testWait = 20 * time.Second

// fakeBox is a Frame whose agent is the test: it writes the agent's lines
// on box and sees whether the host killed it.
type fakeBox struct {
	box    *os.File
	killed chan struct{}
	once   sync.Once
}

// attachFake attaches a Session to a fake box that has said it is ready,
// with process 1 started and waiting for its end.
func attachFake(t *testing.T) (*Session, *fakeBox, *Process) {
	t.Helper()
	f, fb := fakeFrame(t)
	fb.write(t, `{"kind":"ready"}`)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	s, err := Attach(ctx, f)
	if err != nil {
		t.Fatalf("Attach() = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	p := &Process{s: s, id: 1, started: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	s.nextID, s.procs[1], s.seen[1] = 1, p, Pending{}
	s.mu.Unlock()
	fb.write(t, `{"kind":"started","id":1,"pid":7}`)
	return s, fb, p
}

// fakeFrame is the Frame of a fake box, whose agent is the test.
func fakeFrame(t *testing.T) (Frame, *fakeBox) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, box := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "box")
	fb := &fakeBox{box: box, killed: make(chan struct{})}
	t.Cleanup(func() { box.Close() })
	dir := t.TempDir()
	return Frame{
		Control:       host,
		OpenWorkspace: func() (*os.File, error) { return os.Open(dir) },
		Kill:          func() { fb.once.Do(func() { close(fb.killed); box.Close() }) },
		Exited:        fb.killed,
		Cleanup:       func() {},
		// The fake box "pauses" by not writing, which is all a frozen
		// agent does.
		Pause:  func(context.Context) error { return nil },
		Resume: func(context.Context) error { return nil },
	}, fb
}

func (fb *fakeBox) write(t *testing.T, line string) {
	t.Helper()
	if _, err := fb.box.WriteString(line + "\n"); err != nil {
		t.Fatalf("writing %q: %v", line, err)
	}
}

// exited1 is a valid end of process 1.
const exited1 = `{"kind":"exited","id":1,"status":{"exit_code":0}}`

// TestHostileEvents: whatever a box sends after ready, the host neither
// panics nor believes it. A line that breaks the protocol kills the box,
// and the session ends with what was wrong, which stands after the box's
// own end; the process waiting on it is released.
func TestHostileEvents(t *testing.T) {
	tests := []struct{ name, line, want string }{
		{"exited without a status", `{"kind":"exited","id":1}`, "exited event without a status"},
		{"exited with a null status", `{"kind":"exited","id":1,"status":null}`, "exited event without a status"},
		{"exit code out of range", `{"kind":"exited","id":1,"status":{"exit_code":-7}}`, "exit code -7"},
		{"process never started", `{"kind":"exited","id":99,"status":{"exit_code":0}}`, "process 99, which the host never started"},
		{"pid of the agent", `{"kind":"started","id":1,"pid":1}`, "is not 2-"},
		{"ready again", `{"kind":"ready"}`, "out of turn"},
		{"unknown field", `{"kind":"started","id":1,"pid":9,"uid":0}`, `unknown field "uid"`},
		{"garbage", "\x00\x01\xff not json", "invalid character"},
		{"line too long", strings.Repeat("x", maxEventLine+10), "longer than"},
		{"started twice", `{"kind":"started","id":1,"pid":8}`, `a second "started" event for process 1`},
		{"start failure after the start", `{"kind":"exited","id":1,"status":{"exit_code":127,"start_failed":true,"error":"x"}}`, "process 1 failed to start after it started"},
		{"exited twice", exited1 + "\n" + exited1, `"exited" event for process 1, which has already ended`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, fb, p := attachFake(t)
			fb.write(t, tt.line)
			select {
			case <-s.Done():
			case <-time.After(testWait):
				t.Fatalf("the session still runs %s after %q", testWait, tt.line)
			}
			select {
			case <-fb.killed:
			default:
				t.Errorf("the box was not killed after %q", tt.line)
			}
			err := s.Err()
			if !errors.Is(err, ErrSessionEnded) || !strings.Contains(err.Error(), "broke the host protocol") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Err() = %v, want the session ended for a broken protocol: %q", err, tt.want)
			}
			if _, werr := p.Wait(); werr == nil && !strings.HasPrefix(tt.line, exited1) {
				t.Errorf("the waiting process got a status after %q, want the session's end", tt.line)
			}
		})
	}
}

// TestValidExit: a well-formed end reaches its process and the session
// lives on, whether the start was reported before the end or after it
// (the agent's reaper may write first), or never for a start failure.
func TestValidExit(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  int
	}{
		{"after its start", []string{`{"kind":"exited","id":2,"status":{"exit_code":3,"signal":0}}`}, 3},
		{"before its start", []string{`{"kind":"exited","id":2,"status":{"exit_code":4}}`, `{"kind":"started","id":2,"pid":9}`}, 4},
		{"a start failure", []string{`{"kind":"exited","id":2,"status":{"exit_code":127,"start_failed":true,"error":"not found"}}`}, 127},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, fb, p1 := attachFake(t)
			p := &Process{s: s, id: 2, started: make(chan struct{}), done: make(chan struct{})}
			s.mu.Lock()
			s.nextID, s.procs[2], s.seen[2] = 2, p, Pending{}
			s.mu.Unlock()
			if tt.name == "after its start" {
				fb.write(t, `{"kind":"started","id":2,"pid":8}`)
			}
			for _, l := range tt.lines {
				fb.write(t, l)
			}
			st, err := p.Wait()
			if err != nil || st.Code != tt.want {
				t.Errorf("Wait() = %+v, %v, want exit code %d", st, err, tt.want)
			}
			// A round trip: once process 1's end arrives, every event
			// before it has been read.
			fb.write(t, exited1)
			if _, err := p1.Wait(); err != nil {
				t.Errorf("the session ended after valid events: %v", err)
			}
		})
	}
}

// TestBootAnswers: what a box answers first, and then ends, is what
// Attach reports, rather than that the box ended.
func TestBootAnswers(t *testing.T) {
	tests := []struct{ name, line, want string }{
		{"refusal", `{"refused":true,"kind":"failed","exit_code":125,"error":"why","status":{"exit_code":125,"error":"why"}}`, "warden-init refused the sandbox: why"},
		{"failed", `{"kind":"failed","status":{"exit_code":0,"signal":0,"error":"mounting /proc"}}`, "building the sandbox: mounting /proc"},
		{"garbage", `{"kind":"started","id":1,"pid":5}`, "broke the host protocol: event \"started\" out of turn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			host, box := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "box")
			if _, err := box.WriteString(tt.line + "\n"); err != nil {
				t.Fatal(err)
			}
			box.Close()
			exited := make(chan struct{})
			close(exited)
			f := Frame{
				Control: host, Kill: func() {}, Exited: exited, Cleanup: func() {},
				Ended: func() string { return "exit status 112" }, ExitCode: func() int { return 112 },
			}
			ctx, cancel := context.WithTimeout(context.Background(), testWait)
			defer cancel()
			if _, err := Attach(ctx, f); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Attach() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestSilentBox: a box that takes the host's requests and then says
// nothing cannot hold the session. A killed process whose end it does not
// report within killGrace, or a request it leaves unread for sendTimeout,
// ends the session as a broken protocol, kills the box and releases every
// waiter.
func TestSilentBox(t *testing.T) {
	tests := []struct {
		name string
		act  func(s *Session, p *Process)
		want string
	}{
		{"end of a killed process", func(_ *Session, p *Process) { _ = p.Kill() },
			"did not report process 1's end within 5 s of its kill"},
		{"requests left unread", fillControl, "did not read a request within 10 s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, fb, p := attachFake(t)
			go tt.act(s, p)
			select {
			case <-p.done:
			case <-time.After(testWait):
				t.Fatalf("process 1 still waited on %s after the box fell silent", testWait)
			}
			select {
			case <-fb.killed:
			case <-time.After(testWait):
				t.Errorf("the silent box was not killed")
			}
			if err := s.Err(); err == nil || !strings.Contains(err.Error(), "broke the host protocol: "+tt.want) {
				t.Errorf("Err() = %v, want the session ended for a broken protocol: %q", err, tt.want)
			}
		})
	}
}

// fillControl sends kill requests, which the fake box never reads, until
// a send fails; bounded by a count far above what a socket buffer holds.
func fillControl(s *Session, _ *Process) {
	for range 1 << 20 {
		if s.send(nsinit.Request{Op: nsinit.OpKill, ID: 1, Signal: 9}, nil, false) != nil {
			return
		}
	}
}

// TestKillWhilePaused: a paused box cannot report the end of a process
// killed meanwhile; its silence past killGrace is no breach, and the end
// it reports after its resume is taken.
func TestKillWhilePaused(t *testing.T) {
	s, fb, p := attachFake(t)
	ctx := context.Background()
	if err := s.Pause(ctx); err != nil {
		t.Fatalf("Pause() = %v", err)
	}
	go func() { _ = p.Kill() }()
	time.Sleep(killGrace + killGrace/2) // the grace a running box would get, and more
	select {
	case <-fb.killed:
		t.Fatalf("the paused box was killed for its silence: %v", s.Err())
	default:
	}
	if err := s.Resume(ctx); err != nil {
		t.Fatalf("Resume() = %v", err)
	}
	fb.write(t, exited1)
	select {
	case <-p.done:
	case <-time.After(testWait):
		t.Fatal("the process's end, reported after the resume, was not taken")
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err() = %v, want the session alive", err)
	}
}

// TestRestoredAttach: a session of an agent restored from a checkpoint
// (Frame.Restored) attaches without a ready event, gives out IDs above
// PriorIDs, drops the events the processes from before the checkpoint
// still owe (Frame.Prior), each once, and takes any other line for a
// breach.
func TestRestoredAttach(t *testing.T) {
	tests := []struct {
		name, line string
		breach     bool
	}{
		{"a started process from before the checkpoint ends", `{"kind":"exited","id":3,"status":{"exit_code":0}}`, false},
		{"an unstarted one starts and ends", `{"kind":"started","id":5,"pid":9}` + "\n" + `{"kind":"exited","id":5,"status":{"exit_code":0}}`, false},
		{"one ends twice", `{"kind":"exited","id":3,"status":{"exit_code":0}}` + "\n" + `{"kind":"exited","id":3,"status":{"exit_code":0}}`, true},
		{"one starts again", `{"kind":"started","id":3,"pid":9}`, true},
		{"a finished one from before ends", `{"kind":"exited","id":4,"status":{"exit_code":0}}`, true},
		{"ready again", `{"kind":"ready"}`, true},
		{"a process never started", `{"kind":"exited","id":9,"status":{"exit_code":0}}`, true},
		{"garbage", "not json", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, fb := fakeFrame(t)
			f.Restored, f.PriorIDs, f.Prior = true, 5, Unfinished{3: {Events: sawStarted}, 5: {}}
			ctx, cancel := context.WithTimeout(context.Background(), testWait)
			defer cancel()
			s, err := Attach(ctx, f)
			if err != nil {
				t.Fatalf("Attach() = %v", err)
			}
			t.Cleanup(func() { s.Close() })
			if got := s.LastID(); got != 5 {
				t.Errorf("LastID() = %d, want 5", got)
			}
			// A process of this session, whose valid end after the line
			// says the line was read, or whose release says the session
			// ended.
			p := &Process{s: s, id: 6, started: make(chan struct{}), done: make(chan struct{})}
			s.mu.Lock()
			s.nextID, s.procs[6], s.seen[6] = 6, p, Pending{}
			s.mu.Unlock()
			fb.write(t, tt.line)
			if !tt.breach {
				fb.write(t, `{"kind":"exited","id":6,"status":{"exit_code":7}}`)
			}
			select {
			case <-p.done:
			case <-ctx.Done():
				t.Fatalf("after %q: the process was never released", tt.line)
			}
			st, werr := p.Wait()
			switch {
			case tt.breach && (werr == nil || !strings.Contains(s.Err().Error(), "broke the host protocol")):
				t.Errorf("after %q: process got %+v, %v, session %v; want the session ended for a breach", tt.line, st, werr, s.Err())
			case !tt.breach && (werr != nil || st.Code != 7):
				t.Errorf("after %q: process got %+v, %v; want exit 7 and the session alive", tt.line, st, werr)
			}
		})
	}
}

// TestRestoredAttachRefuses: Attach refuses a Prior out of range.
func TestRestoredAttachRefuses(t *testing.T) {
	for _, prior := range []Unfinished{{6: {}}, {0: {}}, {3: {Events: 3}}} {
		f, _ := fakeFrame(t)
		f.Restored, f.PriorIDs, f.Prior = true, 5, prior
		if s, err := Attach(context.Background(), f); err == nil {
			s.Close()
			t.Errorf("Attach() with Prior %v succeeded, want a refusal", prior)
		}
	}
}
