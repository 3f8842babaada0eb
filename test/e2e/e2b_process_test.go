package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/warden-sandbox/warden/internal/e2b/processpb"
	"github.com/warden-sandbox/warden/internal/e2b/processpb/processpbconnect"
)

// e2bProcessClient creates an E2B sandbox for keyA on s and returns a
// client of its process service that speaks as E2B's SDK does (Connect
// with JSON, the sandbox named in headers), and the sandbox's id.
func e2bProcessClient(t *testing.T, s *apiServer) (processpbconnect.ProcessClient, string) {
	t.Helper()
	req, err := http.NewRequest("POST", s.url+"/sandboxes", strings.NewReader(`{"templateID":"base"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", keyA)
	req.Header.Set("Content-Type", "application/json")
	var sb struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	doJSON(t, req, http.StatusCreated, &sb)
	client := processpbconnect.NewProcessClient(&http.Client{Transport: e2bHeaderTransport{sb.SandboxID, sb.EnvdAccessToken}}, s.url,
		connect.WithProtoJSON())
	return client, sb.SandboxID
}

// setE2BHeaders names the sandbox and its token as the SDK does.
func setE2BHeaders(h http.Header, id, token string) {
	h.Set("E2b-Sandbox-Id", id)
	h.Set("E2b-Sandbox-Port", "49983")
	h.Set("X-Access-Token", token)
}

// e2bHeaderTransport adds the sandbox's headers to every request.
type e2bHeaderTransport struct{ id, token string }

func (e e2bHeaderTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	setE2BHeaders(r.Header, e.id, e.token)
	return http.DefaultTransport.RoundTrip(r)
}

// doJSON sends req and decodes the answer, which must have status want.
func doJSON(t *testing.T, req *http.Request, want int, out any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", req.Method, req.URL.Path, resp.StatusCode, body, want)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("%s %s: decoding %s: %v", req.Method, req.URL.Path, body, err)
	}
}

// TestE2BProcessInRealBox: in a real sandbox, a background command
// outlives its dropped stream, takes stdin, and a Connect gets its output
// and end; a killed command ends as killed; SIGTERM can be caught; a
// deleted sandbox's commands are gone with it.
func TestE2BProcessInRealBox(t *testing.T) {
	s := startServer(t)
	client, id := e2bProcessClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	stdin := true
	start := func(script string) uint32 {
		t.Helper()
		sctx, scancel := context.WithCancel(ctx)
		defer scancel() // drops the stream, as a background command's disconnect does
		st, err := client.Start(sctx, connect.NewRequest(&processpb.StartRequest{
			Process: &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", script}}, Stdin: &stdin,
		}))
		if err != nil {
			t.Fatal(err)
		}
		if !st.Receive() || st.Msg().GetEvent().GetStart() == nil {
			t.Fatalf("first event %v (%v), want start", st.Msg(), st.Err())
		}
		return st.Msg().GetEvent().GetStart().GetPid()
	}
	follow := func(pid uint32) (string, *processpb.ProcessEvent_EndEvent) {
		t.Helper()
		st, err := client.Connect(ctx, connect.NewRequest(&processpb.ConnectRequest{Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}}))
		if err != nil {
			t.Fatal(err)
		}
		var out string
		var end *processpb.ProcessEvent_EndEvent
		for st.Receive() {
			out += string(st.Msg().GetEvent().GetData().GetStdout())
			if e := st.Msg().GetEvent().GetEnd(); e != nil {
				end = e
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("connect to %d: %v", pid, err)
		}
		return out, end
	}

	pid := start("read x; echo got $x in $PWD")
	list, err := client.List(ctx, connect.NewRequest(&processpb.ListRequest{}))
	if err != nil || len(list.Msg.GetProcesses()) != 1 || list.Msg.GetProcesses()[0].GetPid() != pid {
		t.Fatalf("list after the stream dropped: %v %v, want the one process %d", list, err, pid)
	}
	sel := &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}
	if _, err := client.SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{Process: sel,
		Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte("hi\n")}}})); err != nil {
		t.Fatalf("SendInput: %v", err)
	}
	if out, end := follow(pid); out != "got hi in /workspace\n" || end.GetExitCode() != 0 || !end.GetExited() {
		t.Errorf("background command: output %q end %v, want its line and exit 0", out, end)
	}

	pid = start("sleep 600")
	if _, err := client.SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{
		Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}, Signal: processpb.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatalf("SendSignal: %v", err)
	}
	if _, end := follow(pid); end.GetExitCode() != -1 || end.GetStatus() != "signal: killed" {
		t.Errorf("killed command: end %v, want exit -1, signal: killed", end)
	}

	// SIGTERM reaches the command's group, which may catch it.
	st, err := client.Start(ctx, connect.NewRequest(&processpb.StartRequest{
		Process: &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", "trap 'echo term; exit 7' TERM; echo up; sleep 600 & wait"}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() {
		t.Fatalf("start: %v", st.Err())
	}
	termPID := st.Msg().GetEvent().GetStart().GetPid()
	if !st.Receive() || string(st.Msg().GetEvent().GetData().GetStdout()) != "up\n" {
		t.Fatalf("want up first, got %v (%v)", st.Msg(), st.Err())
	}
	if _, err := client.SendSignal(ctx, connect.NewRequest(&processpb.SendSignalRequest{
		Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: termPID}}, Signal: processpb.Signal_SIGNAL_SIGTERM})); err != nil {
		t.Fatalf("SendSignal(SIGTERM): %v", err)
	}
	var termOut string
	var termEnd *processpb.ProcessEvent_EndEvent
	for st.Receive() {
		termOut += string(st.Msg().GetEvent().GetData().GetStdout())
		if e := st.Msg().GetEvent().GetEnd(); e != nil {
			termEnd = e
		}
	}
	if termOut != "term\n" || termEnd.GetExitCode() != 7 {
		t.Errorf("SIGTERM: output %q end %v (%v), want the trap's term and exit 7", termOut, termEnd, st.Err())
	}

	pid = start("sleep 600")
	ended := make(chan *processpb.ProcessEvent_EndEvent, 1)
	go func() {
		st, err := client.Connect(ctx, connect.NewRequest(&processpb.ConnectRequest{Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}}))
		var end *processpb.ProcessEvent_EndEvent
		for err == nil && st.Receive() {
			if e := st.Msg().GetEvent().GetEnd(); e != nil {
				end = e
			}
		}
		ended <- end
	}()
	del, err := http.NewRequest("DELETE", s.url+"/sandboxes/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	del.Header.Set("X-API-Key", keyA)
	resp, err := http.DefaultClient.Do(del)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case end := <-ended:
		if end != nil && end.GetExited() {
			t.Errorf("a command of a deleted sandbox ended %v, want killed or its stream cut", end)
		}
	case <-time.After(30 * time.Second):
		t.Error("a command's stream went on 30 s after its sandbox was deleted")
	}
}
