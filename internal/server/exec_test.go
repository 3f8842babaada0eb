package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

func TestExecForms(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create(keyA)
	tests := []struct {
		name string
		body string
		want sandbox.ExecRequest
	}{
		{"command", `{"command":["sh","-c","cat"],"stdin":"hi","env":{"B":"2","A":"1"},"cwd":"sub","timeout_seconds":2.5}`,
			sandbox.ExecRequest{Command: []string{"sh", "-c", "cat"}, Stdin: []byte("hi"), Env: []string{"A=1", "B=2"},
				Cwd: "sub", Timeout: 2500 * time.Millisecond}},
		{"code", `{"language":"python","code":"1+1"}`,
			sandbox.ExecRequest{Language: "python", Code: "1+1", Env: []string{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := h.do("POST", "/v1/sessions/"+id+"/exec", keyA, tt.body)
			if resp.status != http.StatusOK {
				t.Fatalf("got %d %s", resp.status, resp.body)
			}
			var res spec.Result
			if err := json.Unmarshal(resp.body, &res); err != nil || res.Stdout != "out\n" || res.Stderr != "err\n" {
				t.Errorf("result: got %s (%v)", resp.body, err)
			}
			if diff := cmp.Diff(tt.want, h.fake.lastExec); diff != "" {
				t.Errorf("ExecRequest (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCreateAppliesDefaultsAndOverrides(t *testing.T) {
	h := newHarness(t, nil)
	resp := h.do("POST", "/v1/sessions", keyA,
		`{"limits":{"memory_bytes":8388608,"timeout_seconds":5},"network":{"mode":"proxy","allow":["pypi.org"]},"env":{"X":"1"},"ttl_seconds":60,"idle_timeout_seconds":30}`)
	if resp.status != http.StatusCreated {
		t.Fatalf("got %d %s", resp.status, resp.body)
	}
	wantLimits := spec.DefaultLimits
	wantLimits.MemoryBytes = 8 << 20
	wantLimits.Timeout = 5 * time.Second
	want := sandbox.SessionOptions{
		Limits:      wantLimits,
		Network:     spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"pypi.org"}},
		Env:         []string{"X=1"},
		TTL:         time.Minute,
		IdleTimeout: 30 * time.Second,
	}
	if diff := cmp.Diff(want, h.fake.lastOptions); diff != "" {
		t.Errorf("SessionOptions (-want +got):\n%s", diff)
	}
	var s sessionJSON
	if err := json.Unmarshal(resp.body, &s); err != nil {
		t.Fatal(err)
	}
	if *s.Limits.MemoryBytes != 8<<20 || *s.Limits.TimeoutSeconds != 5 || s.Network.Mode != "proxy" {
		t.Errorf("effective values not reported back: %s", resp.body)
	}
}

func TestRun(t *testing.T) {
	h := newHarness(t, nil)
	resp := h.do("POST", "/v1/run", keyA, `{"language":"bash","code":"echo hi","limits":{"pids":8}}`)
	if resp.status != http.StatusOK {
		t.Fatalf("got %d %s", resp.status, resp.body)
	}
	if h.fake.lastOptions.Limits.Pids != 8 || h.fake.lastOptions.Network.Mode != spec.NetNone || h.fake.lastExec.Code != "echo hi" {
		t.Errorf("Run got %+v %+v", h.fake.lastOptions, h.fake.lastExec)
	}
}

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		err      error
		status   int
		code     string
		message  string
		execOnly bool
	}{
		{sandbox.ErrNotFound, 404, "not_found", "session not found", false},
		{fmt.Errorf("exec: %w", sandbox.ErrBusy), 409, "conflict", "session is busy running another exec", true},
		{fmt.Errorf("%w: session ses_x is being snapshotted; retry once that ends", sandbox.ErrBusy), 409, "conflict", "session ses_x is being snapshotted; retry once that ends", true},
		{fmt.Errorf("%w: session ses_x is stopping", sandbox.ErrClosed), 404, "not_found", "session is closed: session ses_x is stopping", false},
		{fmt.Errorf("language cobol: %w", sandbox.ErrUnsupported), 501, "unsupported", "language cobol: not supported", true},
		{fmt.Errorf("%w: cpus 2000 is out of range", spec.ErrInvalid), 400, "bad_request", "cpus 2000 is out of range", false},
		{errors.New("cgroup: no space\nsecond line"), 500, "internal", "cgroup: no space", false},
	}
	for _, tt := range tests {
		t.Run(tt.message, func(t *testing.T) {
			h := newHarness(t, nil)
			id := h.create(keyA)
			h.fake.err = tt.err
			for _, req := range []struct{ method, target, body string }{
				{"GET", "/v1/sessions/" + id, ""},
				{"POST", "/v1/sessions/" + id + "/exec", `{"command":["true"]}`},
				{"POST", "/v1/sessions/" + id + "/exec/stream", `{"command":["true"]}`},
			} {
				if tt.execOnly && req.method == "GET" {
					continue // Get never answers these
				}
				resp := h.do(req.method, req.target, keyA, req.body)
				code, msg := resp.errorMessage()
				if resp.status != tt.status || code != tt.code || msg != tt.message {
					t.Errorf("%s %s: got %d %s %q, want %d %s %q", req.method, req.target,
						resp.status, code, msg, tt.status, tt.code, tt.message)
				}
			}
		})
	}
}

func TestTooManySessionsAndBusy(t *testing.T) {
	h := newHarness(t, nil)
	var id string
	for range h.fake.max {
		id = h.create(keyA)
	}
	resp := h.do("POST", "/v1/sessions", keyA, "{}")
	if code, _ := resp.errorMessage(); resp.status != 429 || code != "too_many_sessions" {
		t.Errorf("over the session limit: got %d %s", resp.status, resp.body)
	}
	h.fake.setState(id, sandbox.StateBusy)
	resp = h.do("POST", "/v1/sessions/"+id+"/exec", keyA, `{"command":["true"]}`)
	if code, _ := resp.errorMessage(); resp.status != 409 || code != "conflict" {
		t.Errorf("exec on a busy session: got %d %s", resp.status, resp.body)
	}
}

// readEvents decodes an NDJSON body, checking that each line is one
// complete event.
func readEvents(t *testing.T, body io.Reader) []event {
	t.Helper()
	var events []event
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		var e event
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		events = append(events, e)
	}
	return events
}

func TestStreamOrder(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create(keyA)
	h.fake.exec = func(_ context.Context, _ sandbox.ExecRequest, live sandbox.Stream) (spec.Result, error) {
		_, _ = io.WriteString(live.Stdout, "one\n")
		_, _ = io.WriteString(live.Stderr, "two\n")
		// "é" split across two writes arrives whole in the second event.
		_, _ = live.Stdout.Write([]byte{'x', 0xc3})
		_, _ = live.Stdout.Write([]byte{0xa9})
		return spec.Result{ExitCode: 3, Stdout: "one\nxé"}, nil
	}
	resp := h.do("POST", "/v1/sessions/"+id+"/exec/stream", keyA, `{"command":["true"]}`)
	if resp.status != 200 || resp.header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("got %d %q", resp.status, resp.header.Get("Content-Type"))
	}
	got := readEvents(t, strings.NewReader(string(resp.body)))
	want := []event{
		{Type: "stdout", Data: "one\n"},
		{Type: "stderr", Data: "two\n"},
		{Type: "stdout", Data: "x"},
		{Type: "stdout", Data: "é"},
		{Type: "result", Result: &spec.Result{ExitCode: 3, Stdout: "one\nxé"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestStreamErrorAfterOutput(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create(keyA)
	h.fake.exec = func(_ context.Context, _ sandbox.ExecRequest, live sandbox.Stream) (spec.Result, error) {
		_, _ = io.WriteString(live.Stdout, "partial")
		return spec.Result{}, errors.New("agent died")
	}
	resp := h.do("POST", "/v1/sessions/"+id+"/exec/stream", keyA, `{"command":["true"]}`)
	got := readEvents(t, strings.NewReader(string(resp.body)))
	want := []event{
		{Type: "stdout", Data: "partial"},
		{Type: "error", Error: &errorDetail{Code: "internal", Message: "agent died"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestStreamIsLiveAndCancels reads the first event while the exec still
// runs, then hangs up: the exec's context must end.
func TestStreamIsLiveAndCancels(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create(keyA)
	cancelled := make(chan struct{})
	h.fake.exec = func(ctx context.Context, _ sandbox.ExecRequest, live sandbox.Stream) (spec.Result, error) {
		_, _ = io.WriteString(live.Stdout, "started\n")
		<-ctx.Done()
		close(cancelled)
		return spec.Result{}, ctx.Err()
	}
	ts := httptest.NewServer(h.srv.Handler())
	defer ts.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/sessions/"+id+"/exec/stream", strings.NewReader(`{"command":["sleep"]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+keyA)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != `{"type":"stdout","data":"started\n"}`+"\n" {
		t.Fatalf("first event: got %q, %v", line, err)
	}
	cancel()
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("the exec's context was not cancelled when the client hung up")
	}
}

func TestCompleteUTF8(t *testing.T) {
	tests := []struct {
		in   []byte
		want int
	}{
		{[]byte("abc"), 3},
		{[]byte{'a', 0xe2, 0x82}, 1},        // "€" cut after two of three bytes
		{[]byte{0xe2, 0x82, 0xac}, 3},       // whole "€"
		{[]byte{'a', 0xff}, 2},              // never valid: sent, replaced
		{[]byte{0xf0, 0x9f, 0x98}, 0},       // three of four bytes
		{[]byte{0x80, 0x80, 0x80, 0x80}, 4}, // continuation bytes only
	}
	for _, tt := range tests {
		if got := spec.CompleteUTF8(tt.in); got != tt.want {
			t.Errorf("CompleteUTF8(% x): got %d, want %d", tt.in, got, tt.want)
		}
	}
}

// TestUnencodableResultIsAnError: a Result that encoding/json refuses (a
// NaN time) gets a one-line 500 answer, not a 200 with a cut body.
func TestUnencodableResultIsAnError(t *testing.T) {
	tests := []struct {
		name, target string
	}{
		{"exec", "/exec"},
		{"run", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.fake.exec = func(context.Context, sandbox.ExecRequest, sandbox.Stream) (spec.Result, error) {
				return spec.Result{Stdout: "out\n", WallTimeMS: math.NaN()}, nil
			}
			target := "/v1/run"
			if tt.target != "" {
				target = "/v1/sessions/" + h.create(keyA) + tt.target
			}
			resp := h.do("POST", target, keyA, `{"command":["true"]}`)
			code, msg := resp.errorMessage()
			if resp.status != http.StatusInternalServerError || !strings.Contains(msg, "encoding the result") {
				t.Errorf("got %d %s %q, want 500 naming the encoding of the result; body %.200q", resp.status, code, msg, resp.body)
			}
		})
	}
}
