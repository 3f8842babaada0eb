package e2b

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/warden-sandbox/warden/internal/e2b/processpb"
	"github.com/warden-sandbox/warden/internal/e2b/processpb/processpbconnect"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// procSessions is a fake Sessions whose Spawn runs the command as a plain
// host process in its own group (harmless commands only: sh, sleep, cat),
// with /workspace mapped to a temporary directory; every other method
// answers as for a session of alice's alone.
type procSessions struct {
	sandbox.Sessions // the calls this fake does not answer panic (nil)
	dir              string
	mu               sync.Mutex
	// last is the last command Spawn was given, before the mapping.
	last interp.Command
	// spawnErr, when set, is what Spawn fails with.
	spawnErr error
	// pay, when set, is the PayOutput of the processes Spawn starts.
	pay func(context.Context, int) error
}

func (f *procSessions) Create(context.Context, string, sandbox.SessionOptions) (sandbox.Info, error) {
	return sandbox.Info{}, errors.ErrUnsupported
}

func (f *procSessions) Get(_ context.Context, owner, id string) (sandbox.Info, error) {
	if owner != "alice" {
		return sandbox.Info{}, sandbox.ErrNotFound
	}
	return sandbox.Info{ID: id, Limits: spec.Limits{CPUs: 1}}, nil
}

func (f *procSessions) List(string) []sandbox.Info                   { return nil }
func (f *procSessions) Delete(context.Context, string, string) error { return nil }
func (f *procSessions) Files(context.Context, string, string) (workspace.Files, error) {
	return nil, errors.ErrUnsupported
}
func (f *procSessions) Exec(context.Context, string, string, sandbox.ExecRequest, sandbox.Stream) (spec.Result, error) {
	return spec.Result{}, errors.ErrUnsupported
}

func (f *procSessions) Spawn(_ context.Context, owner, _ string, c interp.Command) (interp.Process, error) {
	f.mu.Lock()
	f.last = c
	err, pay := f.spawnErr, f.pay
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if owner != "alice" {
		return nil, sandbox.ErrNotFound
	}
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, c.Env...)
	cmd.Dir = f.dir + strings.TrimPrefix(c.Dir, "/workspace")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Files[0], c.Files[1], c.Files[2]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	hp := &procHost{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			hp.st = interp.ExitStatus{Code: 128 + int(ws.Signal()), Signal: int(ws.Signal())}
		} else {
			hp.st = interp.ExitStatus{Code: ws.ExitStatus()}
		}
		close(hp.done)
	}()
	if pay != nil {
		return &procPaying{procHost: hp, pay: pay}, nil
	}
	return hp, nil
}

// procPaying is a procHost that pays for its output, as sandbox.Spawned.
type procPaying struct {
	*procHost
	pay func(context.Context, int) error
}

func (p *procPaying) PayOutput(ctx context.Context, n int) error { return p.pay(ctx, n) }

// procHost is a host process in its own group.
type procHost struct {
	pid  int
	done chan struct{}
	st   interp.ExitStatus
}

func (p *procHost) Wait() (interp.ExitStatus, error) { <-p.done; return p.st, nil }

// Terminate sends SIGTERM to the group, as Warden's agent does.
func (p *procHost) Terminate() error { return syscall.Kill(-p.pid, syscall.SIGTERM) }

func (p *procHost) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	return syscall.Kill(-p.pid, syscall.SIGKILL)
}

// procServer serves the process service for alice's sandbox sb1 as the
// router would (the token already checked), and a JSON client for it, as
// the SDK speaks.
func procServer(t *testing.T) (processpbconnect.ProcessClient, *procSessions, string) {
	c, f, url, _ := procService(t)
	return c, f, url
}

// procService is procServer with the service itself.
func procService(t *testing.T) (processpbconnect.ProcessClient, *procSessions, string, *processService) {
	return procServiceBodies(t, nil)
}

// procServiceBodies is procService whose call bodies are read with
// readBody, as Config.ReadBody (nil: by Connect alone).
func procServiceBodies(t *testing.T, readBody func(http.ResponseWriter, *http.Request, string, int64) ([]byte, func(), error)) (processpbconnect.ProcessClient, *procSessions, string, *processService) {
	t.Helper()
	f := &procSessions{dir: t.TempDir()}
	svc := &processService{sessions: f, log: slog.New(slog.DiscardHandler), tables: procTables{tables: map[string]*procTable{}}}
	mux := http.NewServeMux()
	path, h := processpbconnect.NewProcessHandler(svc, connect.WithReadMaxBytes(procMaxMessageBytes))
	front := &Server{cfg: Config{ReadBody: readBody}, log: svc.log}
	mux.Handle(path, front.chargedBodies(procMaxMessageBytes, knownProcedures("process.Process", processProcedures, h)))
	sb, err := newSandbox("alice", &newSandboxJSON{})
	if err != nil {
		t.Fatal(err)
	}
	sb.ID = "sb1"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r.WithContext(withSandbox(r.Context(), sb)))
	}))
	t.Cleanup(srv.Close)
	return processpbconnect.NewProcessClient(srv.Client(), srv.URL, connect.WithProtoJSON()), f, srv.URL, svc
}

// procStartReq is a Start of sh -c script.
func procStartReq(script string) *connect.Request[processpb.StartRequest] {
	return connect.NewRequest(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", script}}})
}

// procEvents is what a stream sent.
type procEvents struct {
	events         []string // "start", "data", "keepalive", "end", in order
	pid            uint32
	stdout, stderr string
	end            *processpb.ProcessEvent_EndEvent
}

// collect reads a stream's events until it ends (bounded by ctx).
func collectEvents(t *testing.T, next func() bool, msg func() *processpb.ProcessEvent) procEvents {
	t.Helper()
	var c procEvents
	for next() {
		switch e := msg().GetEvent().(type) {
		case *processpb.ProcessEvent_Start:
			c.events, c.pid = append(c.events, "start"), e.Start.GetPid()
		case *processpb.ProcessEvent_Data:
			c.events = append(c.events, "data")
			c.stdout += string(e.Data.GetStdout())
			c.stderr += string(e.Data.GetStderr())
		case *processpb.ProcessEvent_Keepalive:
			c.events = append(c.events, "keepalive")
		case *processpb.ProcessEvent_End:
			c.events, c.end = append(c.events, "end"), e.End
		}
	}
	return c
}

func procRunToEnd(t *testing.T, client processpbconnect.ProcessClient, req *connect.Request[processpb.StartRequest]) procEvents {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := client.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	c := collectEvents(t, st.Receive, func() *processpb.ProcessEvent { return st.Msg().GetEvent() })
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return c
}

// TestStartStreamsInOrder: the start event with a pid comes first, the
// output as data events, the end last with envd's exit fields.
func TestStartStreamsInOrder(t *testing.T) {
	client, _, _ := procServer(t)
	tests := []struct {
		script         string
		stdout, stderr string
		end            *processpb.ProcessEvent_EndEvent
	}{
		{"echo out; echo err >&2", "out\n", "err\n", &processpb.ProcessEvent_EndEvent{ExitCode: 0, Exited: true, Status: "exit status 0"}},
		{"echo x; exit 3", "x\n", "", &processpb.ProcessEvent_EndEvent{ExitCode: 3, Exited: true, Status: "exit status 3", Error: procStr("exit status 3")}},
		{"kill -9 $$", "", "", &processpb.ProcessEvent_EndEvent{ExitCode: -1, Status: "signal: killed", Error: procStr("signal: killed")}},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			c := procRunToEnd(t, client, procStartReq(tt.script))
			if len(c.events) < 2 || c.events[0] != "start" || c.events[len(c.events)-1] != "end" || c.pid < firstPID {
				t.Fatalf("events %v pid %d, want start (pid >= %d) first and end last", c.events, c.pid, firstPID)
			}
			if c.stdout != tt.stdout || c.stderr != tt.stderr {
				t.Errorf("stdout %q stderr %q, want %q %q", c.stdout, c.stderr, tt.stdout, tt.stderr)
			}
			if got, want := c.end.String(), tt.end.String(); got != want {
				t.Errorf("end %s, want %s", got, want)
			}
		})
	}
}

func procStr(s string) *string { return &s }

// TestStartMapsEnvAndCwd: envs reach the process sorted, /home/user is
// /workspace in the box, and a relative cwd is from the home.
func TestStartMapsEnvAndCwd(t *testing.T) {
	client, f, _ := procServer(t)
	if err := os.Mkdir(f.dir+"/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{"/home/user/sub", "sub"} {
		req := connect.NewRequest(&processpb.StartRequest{Process: &processpb.ProcessConfig{
			Cmd: "/bin/sh", Args: []string{"-c", "echo $B$A; pwd"}, Envs: map[string]string{"B": "2", "A": "1"}, Cwd: &cwd,
		}})
		c := procRunToEnd(t, client, req)
		if want := "21\n" + f.dir + "/sub\n"; c.stdout != want {
			t.Errorf("cwd %q: stdout %q, want %q", cwd, c.stdout, want)
		}
		f.mu.Lock()
		got := f.last
		f.mu.Unlock()
		if got.Dir != "/workspace/sub" || strings.Join(got.Env, " ") != "A=1 B=2" {
			t.Errorf("cwd %q: box got dir %q env %q, want /workspace/sub and A=1 B=2", cwd, got.Dir, got.Env)
		}
	}
}

// TestUnknownProcessNotFound: every call naming a process that is not
// there answers not_found, by pid or tag.
func TestUnknownProcessNotFound(t *testing.T) {
	client, _, _ := procServer(t)
	ctx := context.Background()
	for _, sel := range []*processpb.ProcessSelector{
		{Selector: &processpb.ProcessSelector_Pid{Pid: 999999}},
		{Selector: &processpb.ProcessSelector_Tag{Tag: "nope"}},
	} {
		calls := map[string]error{}
		_, calls["SendSignal"] = client.SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{Process: sel, Signal: processpb.Signal_SIGNAL_SIGKILL}))
		_, calls["SendInput"] = client.SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{Process: sel, Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte("x")}}}))
		_, calls["CloseStdin"] = client.CloseStdin(ctx, connect.NewRequest(&processpb.CloseStdinRequest{Process: sel}))
		_, calls["Update"] = client.Update(ctx, connect.NewRequest(&processpb.UpdateRequest{Process: sel}))
		st, err := client.Connect(ctx, connect.NewRequest(&processpb.ConnectRequest{Process: sel}))
		if err == nil {
			for st.Receive() {
			}
			err = st.Err()
		}
		calls["Connect"] = err
		for name, err := range calls {
			if connect.CodeOf(err) != connect.CodeNotFound {
				t.Errorf("%s of %v: got %v, want not_found", name, sel, err)
			}
		}
	}
}

// procStartBackground starts script with stdin and a tag, reads the start
// event and drops the stream, as commands.run(..., {background: true})
// followed by disconnect does; it returns the pid.
func procStartBackground(t *testing.T, client processpbconnect.ProcessClient, script, tag string) uint32 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := procStartReq(script)
	req.Msg.Tag, req.Msg.Stdin = &tag, procBool(true)
	st, err := client.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() || st.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("first event %v (%v), want start", st.Msg(), st.Err())
	}
	return st.Msg().GetEvent().GetStart().GetPid()
}

func procBool(b bool) *bool { return &b }

// TestBackgroundOutlivesStreamAndReconnects: a process whose stream was
// dropped runs on and is listed with its config and tag; stdin reaches
// it; a Connect by tag gets the output made while no stream was
// attached, then the end.
func TestBackgroundOutlivesStreamAndReconnects(t *testing.T) {
	client, _, _, svc := procService(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pid := procStartBackground(t, client, "read x; echo got $x; echo more", "job")
	tb := svc.tables.lookup("sb1")
	tb.mu.Lock()
	out := tb.live[pid].out
	tb.mu.Unlock()
	if !procWaitFor(func() bool { out.mu.Lock(); defer out.mu.Unlock(); return len(out.cursors) == 0 }) {
		t.Fatal("the dropped Start stream stayed attached for 20 s")
	}
	list, err := client.List(ctx, connect.NewRequest(&processpb.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if ps := list.Msg.GetProcesses(); len(ps) != 1 || ps[0].GetPid() != pid || ps[0].GetTag() != "job" || ps[0].GetConfig().GetCmd() != "/bin/sh" {
		t.Fatalf("list %v, want the one process %d tagged job", ps, pid)
	}
	sel := &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}
	if _, err := client.SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{Process: sel, Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte("hi\n")}}})); err != nil {
		t.Fatalf("SendInput: %v", err)
	}
	if !procWaitFor(func() bool {
		list, err := client.List(ctx, connect.NewRequest(&processpb.ListRequest{}))
		return err == nil && len(list.Msg.GetProcesses()) == 0
	}) {
		t.Fatal("the process did not end within 20 s of its input")
	}
	st, err := client.Connect(ctx, connect.NewRequest(&processpb.ConnectRequest{Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Tag{Tag: "job"}}}))
	if err != nil {
		t.Fatal(err)
	}
	c := collectEvents(t, st.Receive, func() *processpb.ProcessEvent { return st.Msg().GetEvent() })
	if c.pid != pid || c.stdout != "got hi\nmore\n" || c.end.GetExitCode() != 0 {
		t.Errorf("connect got pid %d stdout %q end %v (%v), want %d, the kept and further output, exit 0", c.pid, c.stdout, c.end, st.Err(), pid)
	}
	// Once read, the output is not sent again; the end still is.
	st, err = client.Connect(ctx, connect.NewRequest(&processpb.ConnectRequest{Process: sel}))
	if err != nil {
		t.Fatal(err)
	}
	if c := collectEvents(t, st.Receive, func() *processpb.ProcessEvent { return st.Msg().GetEvent() }); strings.Join(c.events, " ") != "start end" {
		t.Errorf("late connect got %v (%v), want start end", c.events, st.Err())
	}
}

// TestSignalsAndStdin: SIGKILL kills a process; SIGTERM reaches its group,
// which may catch it; CloseStdin gives the process end of file; a process
// started without stdin has none to write.
func TestSignalsAndStdin(t *testing.T) {
	client, _, _ := procServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tt := range []struct {
		sig    processpb.Signal
		script string
		stdout string
		end    *processpb.ProcessEvent_EndEvent
	}{
		{processpb.Signal_SIGNAL_SIGKILL, "trap 'echo term; exit 7' TERM; echo up; sleep 60 & wait", "up\n",
			&processpb.ProcessEvent_EndEvent{ExitCode: -1, Status: "signal: killed", Error: procStr("signal: killed")}},
		{processpb.Signal_SIGNAL_SIGTERM, "trap 'echo term; exit 7' TERM; echo up; sleep 60 & wait", "up\nterm\n",
			&processpb.ProcessEvent_EndEvent{ExitCode: 7, Exited: true, Status: "exit status 7", Error: procStr("exit status 7")}},
	} {
		st, err := client.Start(ctx, procStartReq(tt.script))
		if err != nil {
			t.Fatal(err)
		}
		if !st.Receive() {
			t.Fatalf("%v: %v", tt.sig, st.Err())
		}
		sel := &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: st.Msg().GetEvent().GetStart().GetPid()}}
		if !st.Receive() { // "up": the trap is set
			t.Fatalf("%v: %v", tt.sig, st.Err())
		}
		if _, err := client.SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{Process: sel, Signal: tt.sig})); err != nil {
			t.Fatalf("%v: %v", tt.sig, err)
		}
		c := collectEvents(t, st.Receive, func() *processpb.ProcessEvent { return st.Msg().GetEvent() })
		if c.end.String() != tt.end.String() || "up\n"+c.stdout != tt.stdout {
			t.Errorf("%v: stdout %q end %v (%v), want %q and %v", tt.sig, "up\n"+c.stdout, c.end, st.Err(), tt.stdout, tt.end)
		}
	}
	_, err := client.SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{
		Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: procStartBackground(t, client, "sleep 60", "")}}, Signal: 2}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("SIGINT: got %v, want invalid_argument", err)
	}

	pid := procStartBackground(t, client, "cat; echo eof", "cat")
	sel := &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}
	if _, err := client.CloseStdin(ctx, connect.NewRequest(&processpb.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	st, err := client.Connect(ctx, connect.NewRequest(&processpb.ConnectRequest{Process: sel}))
	if err != nil {
		t.Fatal(err)
	}
	if c := collectEvents(t, st.Receive, func() *processpb.ProcessEvent { return st.Msg().GetEvent() }); c.stdout != "eof\n" {
		t.Errorf("after CloseStdin: stdout %q (%v), want eof", c.stdout, st.Err())
	}

	req := procStartReq("sleep 60")
	req.Msg.Stdin = procBool(false)
	st2, err := client.Start(ctx, req)
	if err != nil || !st2.Receive() {
		t.Fatalf("start: %v %v", err, st2.Err())
	}
	sel = &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: st2.Msg().GetEvent().GetStart().GetPid()}}
	_, err = client.SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{Process: sel, Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte("x")}}}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("stdin of a process without: got %v, want failed_precondition", err)
	}
	procKillAll(t, client)
}

// procKillAll kills every listed process, so none outlives its test.
func procKillAll(t *testing.T, client processpbconnect.ProcessClient) {
	t.Helper()
	ctx := context.Background()
	list, err := client.List(ctx, connect.NewRequest(&processpb.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Msg.GetProcesses() {
		sel := &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: p.GetPid()}}
		_, _ = client.SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{Process: sel, Signal: processpb.Signal_SIGNAL_SIGKILL}))
	}
}

// TestTimeoutBoundsTheProcess: Connect-Timeout-Ms on a Start kills the
// process at the deadline, as envd does; keepalives come while it is
// quiet, at the interval asked for.
func TestTimeoutBoundsTheProcess(t *testing.T) {
	client, _, _ := procServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	req := procStartReq("sleep 60")
	req.Header().Set(keepaliveHeader, "1")
	st, err := client.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	c := collectEvents(t, st.Receive, func() *processpb.ProcessEvent { return st.Msg().GetEvent() })
	if len(c.events) == 0 || c.events[0] != "start" {
		t.Fatalf("events %v, want start first", c.events)
	}
	if !procWaitFor(func() bool {
		list, err := client.List(context.Background(), connect.NewRequest(&processpb.ListRequest{}))
		return err == nil && len(list.Msg.GetProcesses()) == 0
	}) {
		t.Error("the process outlived its Connect-Timeout-Ms by 20 s")
	}
	req = procStartReq("sleep 60")
	req.Header().Set(keepaliveHeader, "1")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	st, err = client.Start(ctx2, req)
	if err != nil {
		t.Fatal(err)
	}
	for st.Receive() && st.Msg().GetEvent().GetKeepalive() == nil {
	}
	if st.Msg().GetEvent().GetKeepalive() == nil {
		t.Errorf("no keepalive within 20 s at a 1 s interval (%v)", st.Err())
	}
	procKillAll(t, client)
}

// waitFor polls cond for up to 20 s.
func procWaitFor(cond func() bool) bool {
	for range 200 {
		if cond() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// TestMalformedInput: bad JSON, an unknown procedure, a huge envelope, a
// missing command, a pty and a failing spawn get a clear Connect error,
// and the service goes on serving.
func TestMalformedInput(t *testing.T) {
	client, f, url := procServer(t)
	post := func(path, ctype, body string) (int, string) {
		resp, err := http.Post(url+path, ctype, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := make([]byte, 4096)
		n, _ := resp.Body.Read(b)
		return resp.StatusCode, string(b[:n])
	}
	if code, body := post("/process.Process/List", "application/json", "{bad"); code != http.StatusBadRequest || !strings.Contains(body, "invalid_argument") {
		t.Errorf("bad JSON: %d %s, want 400 invalid_argument", code, body)
	}
	if code, body := post("/process.Process/Nope", "application/json", "{}"); code != http.StatusNotFound || !strings.Contains(body, "not a procedure of process.Process") {
		t.Errorf("unknown procedure: %d %s, want 404 naming it", code, body)
	}
	huge := string([]byte{0, 0x7f, 0xff, 0xff, 0xff}) + "{}"
	if code, body := post("/process.Process/Start", "application/connect+json", huge); code != http.StatusOK || !strings.Contains(body, "resource_exhausted") {
		t.Errorf("huge envelope: %d %q, want 200 and resource_exhausted in the end frame", code, body)
	}
	ctx := context.Background()
	cases := []struct {
		name string
		req  *processpb.StartRequest
		want connect.Code
	}{
		{"no command", &processpb.StartRequest{}, connect.CodeInvalidArgument},
		{"pty", &processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "/bin/sh"}, Pty: &processpb.PTY{}}, connect.CodeUnimplemented},
		{"bad env", &processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "/bin/sh", Envs: map[string]string{"A=B": "c"}}}, connect.CodeInvalidArgument},
		{"bad cwd", &processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "/bin/sh", Cwd: procStr("a\x00b")}}, connect.CodeInvalidArgument},
	}
	for _, tt := range cases {
		st, err := client.Start(ctx, connect.NewRequest(tt.req))
		if err == nil {
			for st.Receive() {
			}
			err = st.Err()
		}
		if connect.CodeOf(err) != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, err, tt.want)
		}
	}
	f.mu.Lock()
	f.spawnErr = fmt.Errorf("%w: session sb1 died", sandbox.ErrDead)
	f.mu.Unlock()
	st, err := client.Start(ctx, procStartReq("true"))
	if err == nil {
		for st.Receive() {
		}
		err = st.Err()
	}
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("dead session: got %v, want failed_precondition", err)
	}
	f.mu.Lock()
	f.spawnErr = nil
	f.mu.Unlock()
	if c := procRunToEnd(t, client, procStartReq("echo still")); c.stdout != "still\n" {
		t.Errorf("after the bad input the service answered %q, want still", c.stdout)
	}
}

// TestProcessLimit: a sandbox runs at most maxProcs processes; the next
// start is refused with resource_exhausted, and a slot frees when one
// ends.
func TestProcessLimit(t *testing.T) {
	client, _, _ := procServer(t)
	defer procKillAll(t, client)
	for range maxProcs {
		procStartBackground(t, client, "sleep 60", "")
	}
	ctx := context.Background()
	st, err := client.Start(ctx, procStartReq("true"))
	if err == nil {
		for st.Receive() {
		}
		err = st.Err()
	}
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "kill one") {
		t.Fatalf("start past the limit: got %v, want resource_exhausted saying what to do", err)
	}
}

// TestOutputLogBounds: with no stream attached the log keeps output up to
// its limit and refuses the rest (counted as dropped); with one attached,
// a writer past the limit waits until the stream reads, or until stop.
func TestOutputLogBounds(t *testing.T) {
	l := newOutputLog(10)
	if !l.add(outChunk{data: []byte("0123456789")}, nil) || l.add(outChunk{data: []byte("x")}, nil) || !l.full() {
		t.Fatalf("detached: kept beyond the limit, or did not say full")
	}
	if l.dropped != 1 {
		t.Errorf("dropped %d, want 1", l.dropped)
	}
	c, _ := l.attach(1)
	if _, ok := l.attach(1); ok {
		t.Error("a second stream attached past the limit of 1")
	}
	added := make(chan bool)
	go func() { added <- l.add(outChunk{data: []byte("y")}, nil) }()
	ch, what := l.next(context.Background(), c, nil)
	if what != nextData || string(ch.data) != "0123456789" {
		t.Fatalf("next: %v %q, want the kept outChunk", what, ch.data)
	}
	select {
	case ok := <-added:
		if !ok {
			t.Error("the waiting writer's outChunk was refused after the stream read")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the writer still waits 20 s after the stream made room")
	}
	stop := make(chan struct{})
	l.add(outChunk{data: []byte("012345678")}, nil) // full again: y + 9 bytes
	go func() { added <- l.add(outChunk{data: []byte("z")}, stop) }()
	close(stop)
	if ok := <-added; ok {
		t.Error("a stopped writer's outChunk was kept")
	}
	l.close()
	for range 2 {
		if _, what := l.next(context.Background(), c, nil); what != nextData {
			t.Fatalf("next after close: %v, want the rest of the data first", what)
		}
	}
	if _, what := l.next(context.Background(), c, nil); what != nextEnd {
		t.Errorf("next at the end: %v, want nextEnd", what)
	}
}

// TestStdinInFlightBound: a sandbox's stdin being written is bounded.
func TestStdinInFlightBound(t *testing.T) {
	tb := &procTable{live: map[uint32]*proc{}}
	if err := tb.takeStdin(maxStdinInFlight); err != nil {
		t.Fatal(err)
	}
	if err := tb.takeStdin(1); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("past the bound: got %v, want resource_exhausted", err)
	}
	tb.giveStdin(maxStdinInFlight)
	if err := tb.takeStdin(1); err != nil {
		t.Errorf("after giving back: %v", err)
	}
}

// TestTablesLeaveNothingBehind: a call that starts nothing keeps no table,
// a start that fails gives its slot back and keeps none, and the table of
// a sandbox whose processes all ended goes with their end events.
func TestTablesLeaveNothingBehind(t *testing.T) {
	client, f, _, svc := procService(t)
	ctx := context.Background()
	if _, err := client.List(ctx, connect.NewRequest(&processpb.ListRequest{})); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.spawnErr = sandbox.ErrClosed
	f.mu.Unlock()
	st, err := client.Start(ctx, procStartReq("true"))
	if err == nil {
		for st.Receive() {
		}
	}
	svc.tables.mu.Lock()
	n := len(svc.tables.tables)
	svc.tables.mu.Unlock()
	if n != 0 {
		t.Errorf("after a List and a failed Start, %d tables are kept, want none", n)
	}
	tb := newProcTable(nil)
	p := &proc{out: newOutputLog(1)}
	if err := tb.reserve(); err != nil {
		t.Fatal(err)
	}
	tb.add(p)
	svc.tables.tables["sb2"] = tb
	tb.retire(p)
	tb.forget(p)
	svc.tables.drop("sb2", tb)
	if svc.tables.lookup("sb2") == tb {
		t.Error("the table of a sandbox whose processes all ended is still kept")
	}
}

// TestStreamInput: a client stream's data reaches the stdin of the process
// its start event names, in order; data before a start is refused.
func TestStreamInput(t *testing.T) {
	client, _, _ := procServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pid := procStartBackground(t, client, "cat", "")
	sel := &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}
	data := func(s string) *processpb.StreamInputRequest {
		return &processpb.StreamInputRequest{Event: &processpb.StreamInputRequest_Data{Data: &processpb.StreamInputRequest_DataEvent{
			Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte(s)}}}}}
	}
	in := client.StreamInput(ctx)
	for _, m := range []*processpb.StreamInputRequest{
		{Event: &processpb.StreamInputRequest_Start{Start: &processpb.StreamInputRequest_StartEvent{Process: sel}}},
		data("a"), {Event: &processpb.StreamInputRequest_Keepalive{Keepalive: &processpb.StreamInputRequest_KeepAlive{}}}, data("b"),
	} {
		if err := in.Send(m); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	if _, err := in.CloseAndReceive(); err != nil {
		t.Fatalf("StreamInput: %v", err)
	}
	if _, err := client.CloseStdin(ctx, connect.NewRequest(&processpb.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	st, err := client.Connect(ctx, connect.NewRequest(&processpb.ConnectRequest{Process: sel}))
	if err != nil {
		t.Fatal(err)
	}
	if c := collectEvents(t, st.Receive, func() *processpb.ProcessEvent { return st.Msg().GetEvent() }); c.stdout != "ab" {
		t.Errorf("cat got %q (%v), want ab", c.stdout, st.Err())
	}
	in = client.StreamInput(ctx)
	if err := in.Send(data("x")); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if _, err := in.CloseAndReceive(); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("data before start: got %v, want invalid_argument", err)
	}
}

// TestStartConfigBound: a Start whose cmd, args, envs, cwd and tag pass
// maxProcConfigBytes is refused with invalid_argument naming the cap,
// and a List of maxProcs maximal Starts stays within its bound.
func TestStartConfigBound(t *testing.T) {
	client, _, _ := procServer(t)
	defer procKillAll(t, client)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	maximal := func(extra int) *connect.Request[processpb.StartRequest] {
		tag := fmt.Sprint(extra, "-", time.Now().UnixNano())
		pad := maxProcConfigBytes - len("/bin/sh") - len("-c") - len("sleep 60") - len(tag) + extra
		return connect.NewRequest(&processpb.StartRequest{Tag: &tag, Stdin: procBool(false), Process: &processpb.ProcessConfig{
			Cmd: "/bin/sh", Args: []string{"-c", "sleep 60", strings.Repeat("x", pad)},
		}})
	}
	st, err := client.Start(ctx, maximal(1))
	if err == nil {
		for st.Receive() {
		}
		err = st.Err()
	}
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), fmt.Sprint(maxProcConfigBytes)) {
		t.Fatalf("a Start one byte past the cap: got %v, want invalid_argument naming %d", err, maxProcConfigBytes)
	}
	for range maxProcs {
		st, err := client.Start(ctx, maximal(0))
		if err != nil {
			t.Fatal(err)
		}
		if !st.Receive() {
			t.Fatalf("a maximal Start sent no start event: %v", st.Err())
		}
		if err := st.Close(); err != nil {
			t.Logf("closing a start stream: %v", err)
		}
	}
	resp, err := client.List(ctx, connect.NewRequest(&processpb.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	bound := maxListConfigBytes + maxProcs*64 // the configs, and a pid and framing for each
	if got := proto.Size(resp.Msg); got > bound || len(resp.Msg.GetProcesses()) != maxProcs {
		t.Errorf("List of %d maximal processes: %d bytes, %d processes; want at most %d bytes and all %d listed",
			maxProcs, got, len(resp.Msg.GetProcesses()), bound, maxProcs)
	}
}

// TestPIDsNotReused: a pid is not handed out again in the sandbox after
// its table was dropped (its processes ended and keepEndedProcs passed,
// on a fake clock), so an old handle never reaches a newer process.
func TestPIDsNotReused(t *testing.T) {
	client, _, _, svc := procService(t)
	forgets := make(chan func(), maxEndedProcs)
	svc.afterFunc = func(d time.Duration, f func()) {
		if d != keepEndedProcs {
			t.Errorf("a process's end is forgotten after %v, want keepEndedProcs (%v)", d, keepEndedProcs)
		}
		forgets <- f
	}
	first := procRunToEnd(t, client, procStartReq("true"))
	select {
	case forget := <-forgets:
		forget() // keepEndedProcs has passed
	case <-time.After(30 * time.Second):
		t.Fatal("the ended process was never scheduled to be forgotten")
	}
	svc.tables.mu.Lock()
	n := len(svc.tables.tables)
	svc.tables.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d tables kept after the only process was forgotten, want none", n)
	}
	second := procRunToEnd(t, client, procStartReq("true"))
	if first.pid == 0 || second.pid == first.pid {
		t.Errorf("pids of a start, then a start after the table was dropped: %d and %d, want two different pids", first.pid, second.pid)
	}
}

// TestOutputPaidBeforeSent: a stream pays for each piece of output on the
// session's pacer before sending it, and while the payment waits (the
// pacer's tokens ran out) nothing is sent: the stream stalls, so the
// process fills its pipe and blocks rather than cost the host more.
func TestOutputPaidBeforeSent(t *testing.T) {
	client, f, _ := procServer(t)
	var received atomic.Int32 // data events the client has had
	release := make(chan struct{})
	paid := make(chan int32, 16)
	f.mu.Lock()
	f.pay = func(ctx context.Context, n int) error {
		paid <- received.Load()
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := client.Start(ctx, procStartReq("echo paced"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan procEvents, 1)
	go func() {
		var c procEvents
		for st.Receive() {
			if d := st.Msg().GetEvent().GetData(); d != nil {
				c.stdout += string(d.GetStdout())
				received.Add(1)
			}
		}
		done <- c
	}()
	select {
	case n := <-paid:
		if n != 0 {
			t.Errorf("the output was paid for after %d data events had been sent, want before any", n)
		}
	case <-ctx.Done():
		t.Fatal("the stream never paid for the process's output")
	}
	close(release)
	if c := <-done; c.stdout != "paced\n" {
		t.Errorf("after the payment the stream sent %q, want %q", c.stdout, "paced\n")
	}
}

// bodyBudget is a fake Config.ReadBody: a share of body memory per owner,
// charged by each body read whole and given back by its release.
type bodyBudget struct {
	mu     sync.Mutex
	share  int
	held   map[string]int
	limits []int64 // the limit of each read
}

// busyError is what the budget answers when a body does not fit, with
// the status server.HoldBody gives it.
type busyError struct{}

func (busyError) Error() string {
	return "server busy: this API key's request bodies fill its share; retry"
}
func (busyError) HTTPStatus() int { return http.StatusServiceUnavailable }

func (b *bodyBudget) read(_ http.ResponseWriter, r *http.Request, owner string, limit int64) ([]byte, func(), error) {
	buf, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, func() {}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.limits = append(b.limits, limit)
	if b.held[owner]+len(buf) > b.share {
		return nil, func() {}, busyError{}
	}
	b.held[owner] += len(buf)
	return buf, sync.OnceFunc(func() {
		b.mu.Lock()
		b.held[owner] -= len(buf)
		b.mu.Unlock()
	}), nil
}

func (b *bodyBudget) holding(owner string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held[owner]
}

// TestConnectBodiesCharged: a Connect call's body is charged to the
// sandbox owner's share of the body budget before it is decoded, and held
// while the call runs: a second large SendInput while the first waits on
// a process that does not read is refused with resource_exhausted.
func TestConnectBodiesCharged(t *testing.T) {
	budget := &bodyBudget{share: 3 << 20, held: map[string]int{}}
	client, _, _, _ := procServiceBodies(t, budget.read)
	defer procKillAll(t, client)
	pid := procStartBackground(t, client, "sleep 60", "")
	sel := &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}
	big := connect.NewRequest(&processpb.SendInputRequest{Process: sel, Input: &processpb.ProcessInput{
		Input: &processpb.ProcessInput_Stdin{Stdin: make([]byte, 1400<<10)}, // about 1.9 MB as base64
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() { _, err := client.SendInput(ctx, big); first <- err }()
	if !procWaitFor(func() bool { return budget.holding("alice") > 1<<20 }) {
		t.Fatal("the first large SendInput was never charged to alice's share")
	}
	_, err := client.SendInput(ctx, big)
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "busy") {
		t.Errorf("a second large SendInput past alice's share: got %v, want resource_exhausted saying the server is busy", err)
	}
	procKillAll(t, client) // the first call's write fails, and its charge goes back
	<-first                //nolint:errcheck // a wait for the goroutine to end: its result is not what this test checks
	if !procWaitFor(func() bool { return budget.holding("alice") == 0 }) {
		t.Errorf("alice's share holds %d bytes after every call ended, want 0", budget.holding("alice"))
	}
	st, err := client.Start(ctx, procStartReq("sleep 60"))
	if err != nil || !st.Receive() {
		t.Fatalf("a Start with the budget: %v, %v", err, st.Err())
	}
	if !procWaitFor(func() bool { return budget.holding("alice") == 0 }) {
		t.Errorf("alice's share holds %d bytes while a Start streams, want 0: a stream's charge goes back once its request is read", budget.holding("alice"))
	}
	procKillAll(t, client)
	budget.mu.Lock()
	defer budget.mu.Unlock()
	for _, l := range budget.limits {
		if l < procMaxMessageBytes || l > procMaxMessageBytes+connectBodySlack {
			t.Errorf("a body was read with limit %d, want the message bound %d plus at most %d", l, procMaxMessageBytes, connectBodySlack)
		}
	}
}
