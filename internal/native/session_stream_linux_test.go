package native

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// startSessionOver starts a native session whose agent is reached by
// transport, with limits l.
func startSessionOver(tb testing.TB, transport AgentTransport, l spec.Limits) *agent.Session {
	tb.Helper()
	testhost.RequireRoot(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Runtime{AgentTransport: transport}.StartSession(ctx, spec.Spec{Limits: l, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
	if err != nil {
		tb.Fatalf("StartSession(%s) = %v", transport, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close() = %v", err)
		}
	})
	return s
}

// streamCase is one exec over the stream transport.
type streamCase struct {
	name   string
	script string
	stdin  string
	// timeout is the exec's (zero: the session's).
	timeout time.Duration
	check   func(t *testing.T, r spec.Result)
}

var streamCases = []streamCase{
	{name: "no stdin is the box's /dev/null, stdout a pipe", script: "readlink /proc/self/fd/0 /proc/self/fd/1", check: func(t *testing.T, r spec.Result) {
		if lines := strings.Split(r.Stdout, "\n"); len(lines) != 3 || lines[0] != "/dev/null" || !strings.HasPrefix(lines[1], "pipe:[") {
			t.Errorf("fds 0 and 1 = %q; want /dev/null and a pipe", r.Stdout)
		}
	}},
	{name: "output and exit code", script: "echo out; echo err >&2; exit 3", check: func(t *testing.T, r spec.Result) {
		if r.ExitCode != 3 || r.Stdout != "out\n" || r.Stderr != "err\n" {
			t.Errorf("exit %d, %q, %q; want 3, \"out\\n\", \"err\\n\"", r.ExitCode, r.Stdout, r.Stderr)
		}
	}},
	{name: "stdin", script: "cat; echo end", stdin: "hello\n", check: func(t *testing.T, r spec.Result) {
		if r.ExitCode != 0 || r.Stdout != "hello\nend\n" {
			t.Errorf("exit %d, stdout %q; want 0, \"hello\\nend\\n\"", r.ExitCode, r.Stdout)
		}
	}},
	{name: "stdin unread", script: "echo ran", stdin: strings.Repeat("x", 1<<20), check: func(t *testing.T, r spec.Result) {
		if r.ExitCode != 0 || r.Stdout != "ran\n" {
			t.Errorf("exit %d, stdout %q; want 0, \"ran\\n\"", r.ExitCode, r.Stdout)
		}
	}},
	{name: "timeout kills the tree", script: "sleep 60 & setsid sleep 60 & sleep 60", timeout: 500 * time.Millisecond, check: func(t *testing.T, r spec.Result) {
		if !r.TimedOut || r.ExitCode != 137 {
			t.Errorf("timed_out %v, exit %d; want true, 137", r.TimedOut, r.ExitCode)
		}
	}},
	{name: "nothing left after the timeout", script: "cat /proc/[0-9]*/comm | grep -c sleep", check: func(t *testing.T, r spec.Result) {
		if strings.TrimSpace(r.Stdout) != "0" {
			t.Errorf("sleeps left: %q, want 0", r.Stdout)
		}
	}},
	{name: "output limit", script: "head -c 10000000 /dev/zero | tr '\\0' a; echo done >&2", check: func(t *testing.T, r spec.Result) {
		if !r.StdoutTruncated || len(r.Stdout) != 1024 || r.Stderr != "done\n" {
			t.Errorf("truncated %v, %d bytes, stderr %q; want true, 1024, done", r.StdoutTruncated, len(r.Stdout), r.Stderr)
		}
	}},
	{name: "not found", script: "exec no-such-program", check: func(t *testing.T, r spec.Result) {
		if r.ExitCode != 127 {
			t.Errorf("exit %d, want 127", r.ExitCode)
		}
	}},
}

// TestStreamSession runs execs over the stream transport: the same
// results as over descriptors, with nothing of the host's in the box.
func TestStreamSession(t *testing.T) {
	l := spec.DefaultLimits
	l.OutputBytes = 1024
	s := startSessionOver(t, TransportStream, l)
	for _, c := range streamCases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var stdin io.Reader
			if c.stdin != "" {
				stdin = strings.NewReader(c.stdin)
			}
			r, err := s.Exec(ctx, agent.ExecSpec{Command: []string{"sh", "-c", c.script}, Timeout: c.timeout}, IO{Stdin: stdin})
			if err != nil {
				t.Fatalf("Exec(%q) = %v", c.script, err)
			}
			c.check(t, r)
		})
	}
}

// TestStreamSessionOOM checks an exec over the memory limit is reported
// over the stream transport too, from the session's cgroup.
func TestStreamSessionOOM(t *testing.T) {
	l := spec.DefaultLimits
	l.MemoryBytes = 64 * spec.MiB
	s := startSessionOver(t, TransportStream, l)
	if s.Cgroup() == nil {
		t.Fatal("no cgroup: the memory limit is not in force, refusing to run the bomb")
	}
	// At most 256 MiB: four times the limit, and it stops by itself.
	bomb := "b = []\nfor _ in range(256): b.append(bytearray(1 << 20))"
	r, err := s.Exec(context.Background(), agent.ExecSpec{Command: []string{"python3", "-c", bomb}}, IO{})
	if err != nil || !r.OOMKilled || r.Signal != "SIGKILL" {
		t.Fatalf("bomb = oom_killed %v, signal %q, err %v; want an OOM kill", r.OOMKilled, r.Signal, err)
	}
	if r := execSh(t, s, "echo alive", 0); r.Stdout != "alive\n" {
		t.Errorf("after the OOM kill stdout = %q, want the session alive", r.Stdout)
	}
}

// TestStreamSessionInterpreter runs a Python interpreter over the stream
// transport: its fds 3 and 4 are pipes too, each a channel.
func TestStreamSessionInterpreter(t *testing.T) {
	s := startSessionOver(t, TransportStream, spec.DefaultLimits)
	it, err := interp.New("python", s, s.Env())
	if err != nil {
		t.Skipf("no python interpreter: %v", err)
	}
	defer it.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	if _, err := it.Run(ctx, "x = 21\nprint('hi')", &out, io.Discard); err != nil {
		t.Fatalf("Run(x = 21) = %v", err)
	}
	o, err := it.Run(ctx, "x * 2", io.Discard, io.Discard)
	if err != nil || o.Value != "42" || out.String() != "hi\n" {
		t.Errorf("x * 2 = %q, %v, printed %q; want 42, nil, \"hi\\n\"", o.Value, err, out.String())
	}
}

// TestStreamSessionHoldsNoHostPipe: over the stream the box's stdio are
// the agent's own pipes, not the host's: while the exec runs, none of
// the pipes it sees is open in this process. Over descriptors they are
// (the control row, which shows the check can see a passed pipe).
func TestStreamSessionHoldsNoHostPipe(t *testing.T) {
	for _, tc := range []struct {
		transport AgentTransport
		shared    bool
	}{{TransportFD, true}, {TransportStream, false}} {
		t.Run(string(tc.transport), func(t *testing.T) {
			s := startSessionOver(t, tc.transport, spec.DefaultLimits)
			seen := make(chan []string, 1)
			stdin, feed := io.Pipe()
			out := &lineWriter{want: 3, lines: seen}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := s.Exec(ctx, agent.ExecSpec{Command: []string{"sh", "-c", "readlink /proc/self/fd/0 /proc/self/fd/1 /proc/self/fd/2; read x"}}, IO{Stdin: stdin, Stdout: out})
				done <- err
			}()
			var box []string
			select {
			case box = <-seen:
			case err := <-done:
				t.Fatalf("the exec ended before it showed its fds: %v", err)
			}
			host := hostPipes(t)
			shared := false
			for _, l := range box {
				shared = shared || host[l]
			}
			if shared != tc.shared {
				t.Errorf("the box's stdio %q: open in this process %v, want %v", box, shared, tc.shared)
			}
			if _, err := feed.Write([]byte("go\n")); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("Exec() = %v", err)
			}
		})
	}
}

// hostPipes is the pipes open in this process, as readlink shows them.
func hostPipes(t *testing.T) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	pipes := map[string]bool{}
	for _, e := range entries {
		// an fd closed since the listing has no link
		if link, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(link, "pipe:[") {
			pipes[link] = true
		}
	}
	return pipes
}

// lineWriter passes on the first want lines written to it, once.
type lineWriter struct {
	want  int
	buf   bytes.Buffer
	lines chan<- []string
	sent  bool
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if lines := strings.Split(w.buf.String(), "\n"); !w.sent && len(lines) > w.want {
		w.sent = true
		w.lines <- lines[:w.want]
	}
	return len(p), nil
}
