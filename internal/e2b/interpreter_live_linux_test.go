package e2b

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/server"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// liveInterp is a real session of the anonymous owner ("", as Warden's
// API serves without keys) behind the code interpreter's routes, on a
// loopback server.
type liveInterp struct {
	mgr *sandbox.Manager
	sb  *Sandbox
	url string
}

// pace is the Manager's ExecPace (0 the default, negative off).
func startLiveInterp(t testing.TB, pace float64) *liveInterp {
	t.Helper()
	testhost.RequireRoot(t)
	limits := spec.DefaultLimits
	limits.Timeout = 30 * time.Second
	mgr := sandbox.NewManager(sandbox.Native{}, sandbox.Config{MaxSessions: 2, DefaultLimits: limits, ExecPace: pace})
	t.Cleanup(func() {
		if err := mgr.Close(); err != nil {
			t.Logf("closing the manager: %v", err)
		}
	})
	info, err := mgr.Create(context.Background(), "", sandbox.SessionOptions{Limits: limits, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
	if err != nil {
		t.Fatalf("creating a session: %v", err)
	}
	sb := &Sandbox{ID: info.ID, Env: map[string]string{"GLOBAL": "g"}}
	s := &Server{cfg: Config{Sessions: mgr}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	mux := http.NewServeMux()
	s.interpreterRoutes(mux)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r.WithContext(withSandbox(r.Context(), sb)))
	}))
	t.Cleanup(hs.Close)
	return &liveInterp{mgr: mgr, sb: sb, url: hs.URL}
}

// post sends body to path and returns the status and the body.
func (l *liveInterp) post(t testing.TB, path, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", l.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading POST %s: %v", path, err)
	}
	return resp.StatusCode, b
}

// run executes body and returns its lines.
func (l *liveInterp) run(t *testing.T, body string) []map[string]any {
	t.Helper()
	status, b := l.post(t, "/execute", body)
	if status != http.StatusOK {
		t.Fatalf("POST /execute %s = %d %q", body, status, b)
	}
	return parseExecLines(t, b)
}

// firstLine is the first line of type typ, or nil.
func firstLine(lines []map[string]any, typ string) map[string]any {
	for _, l := range lines {
		if l["type"] == typ {
			return l
		}
	}
	return nil
}

// TestInterpreterLive runs the code interpreter on a real session:
// Python state across executions, output and exceptions as E2B's SDK
// reads them, a separate context with its own state and cwd, its
// restart, env_vars set only for their execution, and bash and
// JavaScript in their default contexts.
func TestInterpreterLive(t *testing.T) {
	l := startLiveInterp(t, 0)
	l.run(t, `{"code":"x = 1"}`)
	if r := firstLine(l.run(t, `{"code":"x += 1; x"}`), "result"); r == nil || r["text"] != "2" {
		t.Errorf("x += 1; x = %v, want the result 2: state persists", r)
	}
	lines := l.run(t, `{"code":"print('hello')\nimport sys; print('warn', file=sys.stderr)\nnope"}`)
	// stdout and stderr are two pipes: their lines may come in either order.
	got := lineTypes(lines)
	if got != "number_of_executions,stdout,stderr,error,end_of_execution" && got != "number_of_executions,stderr,stdout,error,end_of_execution" {
		t.Errorf("lines %s, want the count, stdout and stderr, the error, the end", got)
	}
	if e := firstLine(lines, "error"); e == nil || e["name"] != "NameError" || !strings.Contains(e["traceback"].(string), "NameError") {
		t.Errorf("error %v, want a NameError with its traceback", e)
	}
	if s := firstLine(lines, "stdout"); s == nil || s["text"] != "hello\n" {
		t.Errorf("stdout %v, want one line hello", s)
	}

	status, b := l.post(t, "/contexts", `{"language":"python","cwd":"/tmp"}`)
	var c contextJSON
	if status != http.StatusOK || json.Unmarshal(b, &c) != nil {
		t.Fatalf("POST /contexts = %d %q", status, b)
	}
	lines = l.run(t, `{"code":"import os; os.getcwd()","context_id":"`+c.ID+`"}`)
	if r := firstLine(lines, "result"); r == nil || r["text"] != "/tmp" {
		t.Errorf("cwd of the context = %v, want /tmp", lines)
	}
	if e := firstLine(l.run(t, `{"code":"x","context_id":"`+c.ID+`"}`), "error"); e == nil || e["value"] != "name 'x' is not defined" {
		t.Errorf("x in a new context = %v, want NameError: its state is its own", e)
	}
	l.run(t, `{"code":"y = 5","context_id":"`+c.ID+`"}`)
	if status, b := l.post(t, "/contexts/"+c.ID+"/restart", ""); status != http.StatusOK {
		t.Fatalf("restart = %d %q", status, b)
	}
	if e := firstLine(l.run(t, `{"code":"y","context_id":"`+c.ID+`"}`), "error"); e == nil || e["name"] != "NameError" {
		t.Errorf("y after a restart = %v, want NameError", e)
	}
	if r := firstLine(l.run(t, `{"code":"import os; os.getcwd()","context_id":"`+c.ID+`"}`), "result"); r == nil || r["text"] != "/tmp" {
		t.Errorf("cwd after a restart = %v, want /tmp again", r)
	}

	env := `"env_vars":{"FOO":"bar","GLOBAL":"own"}`
	if r := firstLine(l.run(t, `{"code":"import os; os.getenv('FOO'), os.getenv('GLOBAL')",`+env+`}`), "result"); r == nil || r["text"] != "('bar', 'own')" {
		t.Errorf("env_vars in the execution = %v, want ('bar', 'own')", r)
	}
	if r := firstLine(l.run(t, `{"code":"import os; os.getenv('FOO', 'default'), os.getenv('GLOBAL')"}`), "result"); r == nil || r["text"] != "('default', 'g')" {
		t.Errorf("env_vars after the execution = %v, want ('default', 'g'): unset, or the sandbox's value", r)
	}
	lines = l.run(t, `{"code":"echo $FOO; false","language":"bash",`+env+`}`)
	if s, e := firstLine(lines, "stdout"), firstLine(lines, "error"); s == nil || s["text"] != "bar\n" || e == nil || e["value"] != "1" {
		t.Errorf("bash = %v, want bar and the status 1 as the error", lines)
	}
	checkLiveChart(t, l)
	if r := firstLine(l.run(t, `{"code":"Promise.resolve(6 * 7)","language":"js"}`), "result"); r == nil || r["text"] != "42" {
		t.Errorf("javascript = %v, want 42", l.run(t, `{"code":"Promise.resolve(6 * 7)","language":"js"}`))
	}
}

// BenchmarkRunCodeVsExec measures `runCode('1+1')` through the code
// interpreter against the same code through Warden's own exec API, on
// one session and one warm Python interpreter, alternating the two in
// every iteration so both see the same machine. Exec pacing is off: it
// would charge both the same and hide the round trip under its waits.
// It reports each one's mean round trip and their ratio (the target is
// at most 2).
func BenchmarkRunCodeVsExec(b *testing.B) {
	l := startLiveInterp(b, -1)
	api, err := server.New(l.mgr, server.Config{AllowAnonymous: true})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(api.Handler())
	b.Cleanup(hs.Close)
	execPath := fmt.Sprintf("%s/v1/sessions/%s/exec", hs.URL, l.sb.ID)
	wardenBody := `{"language":"python","code":"1+1"}`
	e2bBody := `{"code":"1+1"}`
	warden := func() {
		resp, err := http.Post(execPath, "application/json", strings.NewReader(wardenBody))
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"value":"2"`)) {
			b.Fatalf("Warden exec = %d %q", resp.StatusCode, body)
		}
	}
	e2b := func() {
		if status, body := l.post(b, "/execute", e2bBody); status != http.StatusOK || !bytes.Contains(body, []byte(`"text":"2"`)) {
			b.Fatalf("E2B execute = %d %q", status, body)
		}
	}
	warden()
	e2b()
	var tw, te time.Duration
	iters := 0
	for b.Loop() {
		iters++
		t0 := time.Now()
		warden()
		t1 := time.Now()
		e2b()
		te += time.Since(t1)
		tw += t1.Sub(t0)
	}
	n := float64(iters)
	b.ReportMetric(float64(tw.Microseconds())/n, "warden-µs/op")
	b.ReportMetric(float64(te.Microseconds())/n, "e2b-µs/op")
	b.ReportMetric(float64(te)/float64(tw), "e2b/warden")
}

// checkLiveChart: a matplotlib figure comes back as a png result, base64
// of a PNG, beside the value; skipped where the sandbox's Python has no
// matplotlib.
func checkLiveChart(t *testing.T, l *liveInterp) {
	t.Helper()
	lines := l.run(t, `{"code":"import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()\n7"}`)
	if e := firstLine(lines, "error"); e != nil && e["name"] == "ModuleNotFoundError" {
		t.Logf("no matplotlib in the sandbox: chart not checked (%v)", e["value"])
		return
	}
	r := firstLine(lines, "result")
	png, _ := r["png"].(string)
	head, err := base64.StdEncoding.DecodeString(png)
	if r == nil || r["is_main_result"] != false || err != nil || !bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("chart lines %s, first result without a base64 PNG (%v)", lineTypes(lines), err)
	}
	if main := lines[len(lines)-2]; main["text"] != "7" || main["is_main_result"] != true {
		t.Errorf("last result %v, want the value 7 as the main result after the chart", main)
	}
}
