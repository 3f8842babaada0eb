package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/spec"
)

// fakeProgram is what a process the fake agent starts does with its
// stdin, stdout and stderr once it runs (the agent closes them after),
// returning its Status, or block to wait for the host's kill instead. A
// program with startFailure never runs: the agent reports that Status.
type fakeProgram struct {
	startFailure *nsinit.Status
	run          func(files []*os.File) (st nsinit.Status, block bool)
}

// fakeAgent plays nsinit's agent on the box's end of a session: it reads
// the host's framed requests and their descriptors, as the real agent
// does, and answers with events.
type fakeAgent struct {
	box  *os.File
	run  fakeProgram
	mu   sync.Mutex
	reqs []nsinit.Request
	// kills gets the id of every process the host asked to kill.
	kills chan uint64
}

// startFakeSession attaches a Session to a fakeAgent running run for
// every spawn, with limits l (1 MiB of output when l sets none).
func startFakeSession(t *testing.T, l spec.Limits, run fakeProgram) (*Session, *fakeAgent) {
	t.Helper()
	if l.OutputBytes == 0 {
		l.OutputBytes = spec.MiB
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, box := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "box")
	exited := make(chan struct{})
	var once sync.Once
	dir := t.TempDir()
	f := Frame{
		Spec:          spec.Spec{Limits: l, Env: []string{"SPEC=1"}},
		Control:       host,
		Env:           func(extra []string) []string { return Env(false, extra) },
		OpenWorkspace: func() (*os.File, error) { return os.Open(dir) },
		// The box's end stops writing, which ends the host's reading, and
		// then the host's end closes, which ends the fake agent's.
		Kill: func() {
			once.Do(func() {
				_ = unix.Shutdown(int(box.Fd()), unix.SHUT_WR)
				close(exited)
			})
		},
		Exited:  exited,
		Cleanup: func() {},
	}
	fa := &fakeAgent{box: box, run: run, kills: make(chan uint64, 16)}
	fa.send(t, nsinit.Event{Kind: nsinit.EventReady})
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	s, err := Attach(ctx, f)
	if err != nil {
		t.Fatalf("Attach() = %v", err)
	}
	served := make(chan struct{})
	go func() { defer close(served); fa.serve(t) }()
	t.Cleanup(func() {
		s.Close()
		select {
		case <-served:
		case <-time.After(testWait):
			t.Errorf("the fake agent still serves %s after the session closed", testWait)
		}
		box.Close()
	})
	return s, fa
}

func (fa *fakeAgent) send(t *testing.T, e nsinit.Event) {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	if err := json.NewEncoder(fa.box).Encode(e); err != nil {
		t.Logf("fake agent: sending %+v: %v", e, err)
	}
}

// serve answers requests until the host hangs up.
func (fa *fakeAgent) serve(t *testing.T) {
	for {
		req, files, err := fa.read()
		if err != nil {
			return
		}
		fa.mu.Lock()
		fa.reqs = append(fa.reqs, req)
		fa.mu.Unlock()
		switch req.Op {
		case nsinit.OpSpawn:
			go fa.spawn(t, req, files)
		case nsinit.OpKill:
			fa.kills <- req.ID
		}
	}
}

// read reads one request as nsinit's agent does: the descriptors arrive
// with the frame's first bytes.
func (fa *fakeAgent) read() (nsinit.Request, []*os.File, error) {
	var req nsinit.Request
	head := make([]byte, 4)
	oob := make([]byte, unix.CmsgSpace(16*4))
	n, oobn, _, _, err := nsinit.RecvmsgRetry(int(fa.box.Fd()), head, oob)
	if err != nil || n == 0 {
		return req, nil, io.EOF
	}
	var files []*os.File
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return req, nil, err
	}
	for i := range msgs {
		fds, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			return req, nil, err
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "request"))
		}
	}
	if _, err := io.ReadFull(fa.box, head[n:]); err != nil {
		return req, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(head))
	if _, err := io.ReadFull(fa.box, body); err != nil {
		return req, nil, err
	}
	return req, files, json.Unmarshal(body, &req)
}

// spawn runs the fake program for req, then reports its end, or waits
// for the host's kill when the program blocks.
func (fa *fakeAgent) spawn(t *testing.T, req nsinit.Request, files []*os.File) {
	if fa.run.startFailure != nil {
		closeAllFiles(files)
		fa.send(t, nsinit.Event{Kind: nsinit.EventExited, ID: req.ID, Status: fa.run.startFailure})
		return
	}
	fa.send(t, nsinit.Event{Kind: nsinit.EventStarted, ID: req.ID, Pid: 100 + int(req.ID)})
	st, block := fa.run.run(files)
	closeAllFiles(files)
	if block {
		select {
		case id := <-fa.kills:
			if id != req.ID {
				t.Errorf("the kill named process %d, want %d, the one spawned", id, req.ID)
			}
			st = nsinit.Status{ExitCode: 137, Signal: 9}
		case <-time.After(testWait):
			t.Errorf("process %d was never killed", req.ID)
			return
		}
	}
	fa.send(t, nsinit.Event{Kind: nsinit.EventExited, ID: req.ID, Status: &st, CPUTimeUS: 1500, MaxRSSKiB: 2})
}

func closeAllFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// writeOut is a fake program that prints out and errOut and exits code.
func writeOut(out, errOut string, code int) fakeProgram {
	return fakeProgram{run: func(files []*os.File) (nsinit.Status, bool) {
		_, _ = io.WriteString(files[1], out)
		_, _ = io.WriteString(files[2], errOut)
		return nsinit.Status{ExitCode: code}, false
	}}
}

// TestExecAgainstFakeAgent: Exec's plumbing and bookkeeping, end to end
// against an agent that speaks the protocol: the request it sends, the
// stdin it feeds, the output it captures and bounds, the start failures
// it reports as a shell would, and the timeout that kills the command.
func TestExecAgainstFakeAgent(t *testing.T) {
	tests := []struct {
		name  string
		limit spec.Limits
		exec  ExecSpec
		stdin io.Reader
		run   fakeProgram
		want  spec.Result
	}{
		{"output and exit code", spec.Limits{}, ExecSpec{Command: []string{"prog"}}, nil,
			writeOut("out\n", "err\n", 3), spec.Result{ExitCode: 3, Stdout: "out\n", Stderr: "err\n", CPUTimeMS: 1.5, PeakMemoryBytes: 2048}},
		{"signal", spec.Limits{}, ExecSpec{Command: []string{"prog"}}, nil,
			fakeProgram{run: func([]*os.File) (nsinit.Status, bool) {
				return nsinit.Status{ExitCode: 128 + 15, Signal: 15}, false
			}}, spec.Result{ExitCode: 143, Signal: "SIGTERM", CPUTimeMS: 1.5, PeakMemoryBytes: 2048}},
		{"stdin reaches the program", spec.Limits{}, ExecSpec{Command: []string{"cat"}}, strings.NewReader("ping"),
			fakeProgram{run: func(files []*os.File) (nsinit.Status, bool) {
				b, _ := io.ReadAll(files[0])
				_, _ = files[1].Write(b)
				return nsinit.Status{}, false
			}}, spec.Result{Stdout: "ping", CPUTimeMS: 1.5, PeakMemoryBytes: 2048}},
		{"no stdin reads as empty", spec.Limits{}, ExecSpec{Command: []string{"cat"}}, nil,
			fakeProgram{run: func(files []*os.File) (nsinit.Status, bool) {
				b, err := io.ReadAll(files[0])
				fmt.Fprintf(files[1], "%q %v", b, err)
				return nsinit.Status{}, false
			}}, spec.Result{Stdout: `"" <nil>`, CPUTimeMS: 1.5, PeakMemoryBytes: 2048}},
		{"output past the limit", spec.Limits{OutputBytes: 4}, ExecSpec{Command: []string{"prog"}}, nil,
			writeOut("0123456789", "ab", 0), spec.Result{Stdout: "0123", StdoutTruncated: true, Stderr: "ab", CPUTimeMS: 1.5, PeakMemoryBytes: 2048}},
		{"not found", spec.Limits{}, ExecSpec{Command: []string{"nope"}}, nil,
			fakeProgram{startFailure: &nsinit.Status{ExitCode: 127, StartFailed: true, Error: `command "nope" not found`}}, spec.Result{ExitCode: 127, Stderr: "warden: command \"nope\" not found\n"}},
		{"timeout kills the command", spec.Limits{}, ExecSpec{Command: []string{"sleep"}, Timeout: 50 * time.Millisecond}, nil,
			fakeProgram{run: func([]*os.File) (nsinit.Status, bool) { return nsinit.Status{}, true }},
			spec.Result{ExitCode: 137, Signal: "SIGKILL", TimedOut: true, CPUTimeMS: 1.5, PeakMemoryBytes: 2048}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := startFakeSession(t, tt.limit, tt.run)
			ctx, cancel := context.WithTimeout(context.Background(), testWait)
			defer cancel()
			got, err := s.Exec(ctx, tt.exec, IO{Stdin: tt.stdin})
			if err != nil {
				t.Fatalf("Exec() = %v", err)
			}
			got.WallTimeMS = 0
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Exec() differs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExecRequest: what the host asks the agent for is the command, its
// directory, the session's environment with the exec's on top, and the
// three standard descriptors, under ids that grow.
func TestExecRequest(t *testing.T) {
	s, fa := startFakeSession(t, spec.Limits{}, writeOut("", "", 0))
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	for range 2 {
		if _, err := s.Exec(ctx, ExecSpec{Command: []string{"ls", "-l"}, Env: []string{"X=1", "SPEC=2"}, Dir: "/tmp"}, IO{}); err != nil {
			t.Fatalf("Exec() = %v", err)
		}
	}
	fa.mu.Lock()
	defer fa.mu.Unlock()
	if len(fa.reqs) != 2 {
		t.Fatalf("the agent got %d requests, want 2: %+v", len(fa.reqs), fa.reqs)
	}
	for i, req := range fa.reqs {
		if req.Op != nsinit.OpSpawn || req.ID != uint64(i+1) || !slices.Equal(req.Argv, []string{"ls", "-l"}) || req.Dir != "/tmp" || req.Files != 3 || req.Cgroup != 0 {
			t.Errorf("request %d = %+v, want spawn of id %d, ls -l in /tmp with 3 files", i, req, i+1)
		}
		if !slices.Contains(req.Env, "X=1") || !slices.Contains(req.Env, "SPEC=2") || slices.Contains(req.Env, "SPEC=1") || !slices.Contains(req.Env, "USER=sandbox") {
			t.Errorf("request %d env = %q, want the base, then SPEC=2 over the spec's SPEC=1, and X=1", i, req.Env)
		}
	}
}

// TestExecRefusesBadInput: an exec the host can tell is wrong never
// reaches the agent.
func TestExecRefusesBadInput(t *testing.T) {
	tests := []struct {
		name string
		exec ExecSpec
		want string
	}{
		{"no command", ExecSpec{}, "no command given"},
		{"empty program", ExecSpec{Command: []string{""}}, "no command given"},
		{"env without =", ExecSpec{Command: []string{"ls"}, Env: []string{"NOEQUALS"}}, "NOEQUALS"},
	}
	s, fa := startFakeSession(t, spec.Limits{}, writeOut("", "", 0))
	for _, tt := range tests {
		_, err := s.Exec(context.Background(), tt.exec, IO{})
		if !errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Exec() = %v, want an invalid-input error naming %q", tt.name, err, tt.want)
		}
	}
	fa.mu.Lock()
	defer fa.mu.Unlock()
	if len(fa.reqs) != 0 {
		t.Errorf("the agent got %+v, want no request", fa.reqs)
	}
}
