package e2b

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestExecuteLines: an execution streams its output as stdout and stderr
// lines (finished lines together, an unfinished one held for the rest),
// then its results, its error and end_of_execution, after the execution
// count; every line is one JSON object.
func TestExecuteLines(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfake")
	tests := []struct {
		name   string
		lang   string
		writes []string // to stdout, "!" prefix for stderr
		res    spec.Result
		want   string // the types of the lines
		check  func(t *testing.T, lines []map[string]any)
	}{
		{
			name: "value", res: spec.Result{Value: "'hi'"},
			want: "number_of_executions,result,end_of_execution",
			check: func(t *testing.T, l []map[string]any) {
				if l[0]["execution_count"] != 1.0 || l[1]["text"] != "hi" || l[1]["is_main_result"] != true {
					t.Errorf("lines %v, want count 1 and the main result hi (quotes dropped, as E2B's server does)", l)
				}
			},
		},
		{
			name: "output lines", writes: []string{"a\nb", "c\n", "!oops\n", "tail"},
			want: "number_of_executions,stdout,stdout,stderr,stdout,end_of_execution",
			check: func(t *testing.T, l []map[string]any) {
				got := []any{l[1]["text"], l[2]["text"], l[3]["text"], l[4]["text"]}
				want := []any{"a\n", "bc\n", "oops\n", "tail"}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("texts %q, want %q", got, want)
				}
			},
		},
		{
			name: "rich outputs",
			res: spec.Result{Value: "3", Outputs: []spec.Output{
				{MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(png), Encoding: "base64"},
				{MimeType: "text/html", Data: "<b>x</b>", Encoding: "utf-8"},
				{MimeType: "application/json", Data: `{"a":1}`, Encoding: "utf-8"},
				{MimeType: "image/svg+xml", Data: base64.StdEncoding.EncodeToString([]byte("<svg/>")), Encoding: "base64"},
				{MimeType: "application/x-thing", Data: "t", Encoding: "utf-8"},
				{MimeType: "text/markdown", Data: "# h", Encoding: "utf-8"},
				{MimeType: "text/latex", Data: "$x$", Encoding: "utf-8"},
				{MimeType: "application/javascript", Data: "1", Encoding: "utf-8"},
				{MimeType: "text/plain", Data: "'t'", Encoding: "utf-8"},
				{MimeType: "image/jpeg", Data: "raw", Encoding: "utf-8"},
			}},
			want: "number_of_executions" + strings.Repeat(",result", 11) + ",end_of_execution",
			check: func(t *testing.T, l []map[string]any) {
				checks := []struct {
					i     int
					field string
					want  any
				}{
					{1, "png", base64.StdEncoding.EncodeToString(png)}, {1, "is_main_result", false},
					{2, "html", "<b>x</b>"}, {3, "json", map[string]any{"a": 1.0}}, {4, "svg", "<svg/>"},
					{5, "extra", map[string]any{"application/x-thing": "t"}}, {6, "markdown", "# h"},
					{7, "latex", "$x$"}, {8, "javascript", "1"}, {9, "text", "t"},
					{10, "jpeg", base64.StdEncoding.EncodeToString([]byte("raw"))},
					{11, "text", "3"}, {11, "is_main_result", true},
				}
				for _, c := range checks {
					if fmt.Sprint(l[c.i][c.field]) != fmt.Sprint(c.want) {
						t.Errorf("line %d %s = %v, want %v", c.i, c.field, l[c.i][c.field], c.want)
					}
				}
			},
		},
		{
			name: "exception",
			res:  spec.Result{Exception: &spec.Exception{Type: "NameError", Message: "name 'x' is not defined", Traceback: "Traceback ...\nNameError"}},
			want: "number_of_executions,error,end_of_execution",
			check: func(t *testing.T, l []map[string]any) {
				if l[1]["name"] != "NameError" || l[1]["value"] != "name 'x' is not defined" || l[1]["traceback"] != "Traceback ...\nNameError" {
					t.Errorf("error line %v, want name, value and traceback of the exception", l[1])
				}
			},
		},
		{
			name: "bash status", lang: "bash", res: spec.Result{ExitCode: 2},
			want: "number_of_executions,error,end_of_execution",
			check: func(t *testing.T, l []map[string]any) {
				if l[1]["name"] != "" || l[1]["value"] != "2" {
					t.Errorf("error line %v, want E2B's bash kernel's: no name, the status as value", l[1])
				}
			},
		},
		{name: "python status is no error", res: spec.Result{ExitCode: 1}, want: "number_of_executions,end_of_execution"},
		{
			name: "timeout", res: spec.Result{TimedOut: true, InterpreterRestarted: true},
			want: "number_of_executions,error,end_of_execution",
			check: func(t *testing.T, l []map[string]any) {
				if l[1]["name"] != "TimeoutError" {
					t.Errorf("error line %v, want a TimeoutError", l[1])
				}
			},
		},
		{
			name: "died", res: spec.Result{InterpreterRestarted: true, OOMKilled: true, Signal: "SIGKILL"},
			want: "number_of_executions,error,end_of_execution",
			check: func(t *testing.T, l []map[string]any) {
				if l[1]["name"] != "InterpreterDied" || !strings.Contains(l[1]["value"].(string), "out of memory") {
					t.Errorf("error line %v, want InterpreterDied saying out of memory", l[1])
				}
			},
		},
		{
			name: "truncated", writes: []string{"x\n"}, res: spec.Result{StdoutTruncated: true},
			want: "number_of_executions,stdout,stderr,end_of_execution",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &interpSessions{run: func(_ context.Context, _ sandbox.ExecRequest, live sandbox.Stream) (spec.Result, error) {
				for _, w := range tt.writes {
					if s, ok := strings.CutPrefix(w, "!"); ok {
						_, _ = live.Stderr.Write([]byte(s))
					} else {
						_, _ = live.Stdout.Write([]byte(w))
					}
				}
				return tt.res, nil
			}}
			h := newInterpHarness(t, fake)
			body := `{"code":"x"}`
			if tt.lang != "" {
				body = `{"code":"x","language":"` + tt.lang + `"}`
			}
			lines := h.execute(body)
			if got := lineTypes(lines); got != tt.want {
				t.Fatalf("lines %s, want %s", got, tt.want)
			}
			if tt.check != nil {
				tt.check(t, lines)
			}
		})
	}
}

// TestExecuteRefusals: a bad body, an unknown language or context, and a
// refusal of the Manager before any output each get their status and a
// one-line plain-text answer, and run nothing.
func TestExecuteRefusals(t *testing.T) {
	tests := []struct {
		name   string
		as     *Sandbox
		body   string
		err    error // the Manager's answer
		status int
		says   string
	}{
		{"not JSON", ciAlice, `{"code":`, nil, http.StatusBadRequest, "not the JSON object"},
		{"two values", ciAlice, `{"code":"1"} {}`, nil, http.StatusBadRequest, "more than one JSON value"},
		{"no code", ciAlice, `{}`, nil, http.StatusBadRequest, "code is missing"},
		{"code not a string", ciAlice, `{"code":1}`, nil, http.StatusBadRequest, "not the JSON object"},
		{"both context and language", ciAlice, `{"code":"1","context_id":"x","language":"python"}`, nil, http.StatusBadRequest, "Only one of context_id or language"},
		{"unknown language", ciAlice, `{"code":"1","language":"r"}`, nil, http.StatusBadRequest, `unknown language "r": use python, bash, javascript`},
		{"typescript", ciAlice, `{"code":"1","language":"ts"}`, nil, http.StatusBadRequest, "TypeScript is not served yet"},
		{"unknown context", ciAlice, `{"code":"1","context_id":"nope"}`, nil, http.StatusNotFound, `Context "nope" not found`},
		{"bad env name", ciAlice, `{"code":"1","env_vars":{"A-B":"1"}}`, nil, http.StatusBadRequest, "not a variable name"},
		{"env value with NUL", ciAlice, `{"code":"1","env_vars":{"A":"x\u0000y"}}`, nil, http.StatusBadRequest, "NUL"},
		{"env value not a string", ciAlice, `{"code":"1","env_vars":{"A":1}}`, nil, http.StatusBadRequest, "not the JSON object"},
		{"too large", ciAlice, `{"code":"` + strings.Repeat("x", maxExecuteBody) + `"}`, nil, http.StatusRequestEntityTooLarge, "larger than"},
		{"sandbox gone", ciAlice, `{"code":"1"}`, sandbox.ErrNotFound, http.StatusBadGateway, "create a new one"},
		{"sandbox dead", ciAlice, `{"code":"1"}`, sandbox.ErrDead, http.StatusBadGateway, "create a new one"},
		{"paced", ciAlice, `{"code":"1"}`, fmt.Errorf("%w: retry in 2s", sandbox.ErrPaced), http.StatusTooManyRequests, "retry in 2s"},
		{"invalid", ciAlice, `{"code":"1"}`, fmt.Errorf("%w: bad", spec.ErrInvalid), http.StatusBadRequest, "bad"},
		{"context restarted meanwhile", ciAlice, `{"code":"1"}`, fmt.Errorf("running python: %w", interp.ErrClosed), http.StatusConflict, "run it again"},
		{"internal", ciAlice, `{"code":"1"}`, errors.New("spawn /secret/host/path failed"), http.StatusInternalServerError, "see the server's log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &interpSessions{run: func(context.Context, sandbox.ExecRequest, sandbox.Stream) (spec.Result, error) {
				return spec.Result{}, tt.err
			}}
			h := newInterpHarness(t, fake)
			w := h.do(tt.as, "POST", "/execute", tt.body)
			body := w.Body.String()
			if w.Code != tt.status || !strings.Contains(body, tt.says) || strings.Count(body, "\n") != 1 {
				t.Errorf("answer %d %q, want %d, one line saying %q", w.Code, body, tt.status, tt.says)
			}
			if strings.Contains(body, "/secret") {
				t.Errorf("answer %q shows an internal cause; want it only logged", body)
			}
			if tt.err == nil && len(fake.recorded()) != 0 {
				t.Errorf("a refused request ran %v, want nothing run", fake.recorded())
			}
		})
	}
}

// TestExecuteWaitsWhileBusy: a session busy with an exec started
// elsewhere makes the execution wait for its turn, as E2B's server
// queues executions, rather than fail.
func TestExecuteWaitsWhileBusy(t *testing.T) {
	busy := 3
	fake := &interpSessions{run: func(context.Context, sandbox.ExecRequest, sandbox.Stream) (spec.Result, error) {
		if busy > 0 {
			busy--
			return spec.Result{}, fmt.Errorf("%w: running another exec", sandbox.ErrBusy)
		}
		return spec.Result{Value: "2"}, nil
	}}
	h := newInterpHarness(t, fake)
	lines := h.execute(`{"code":"1+1"}`)
	if got := lineTypes(lines); got != "number_of_executions,result,end_of_execution" || lines[1]["text"] != "2" {
		t.Errorf("lines %v, want the result once the session was free", lines)
	}
	if n := len(fake.recorded()); n != 4 {
		t.Errorf("%d execs tried, want 4 (3 busy, then the run)", n)
	}
}

// TestExecuteLanguagesAndCount: the language picks the default context
// (python without one, js as javascript), each run in the session's
// default interpreter, and each context counts its executions.
func TestExecuteLanguagesAndCount(t *testing.T) {
	fake := &interpSessions{}
	h := newInterpHarness(t, fake)
	bodies := []string{`{"code":"1"}`, `{"code":"2","language":"JS "}`, `{"code":"3","language":"python"}`, `{"code":"4","language":"bash"}`}
	wantCounts := []float64{1, 1, 2, 1}
	for i, body := range bodies {
		lines := h.execute(body)
		if lines[0]["execution_count"] != wantCounts[i] {
			t.Errorf("%s: execution_count %v, want %v", body, lines[0]["execution_count"], wantCounts[i])
		}
	}
	var got []string
	for _, req := range fake.recorded() {
		got = append(got, req.Language+":"+req.Interpreter+":"+req.Code)
	}
	if want := "python::1 javascript::2 python::3 bash::4"; strings.Join(got, " ") != want {
		t.Errorf("execs %q, want %q", strings.Join(got, " "), want)
	}
	list := contextsOf(t, h, ciAlice)
	if len(list) != 3 || list[0].Language != "python" || list[1].Language != "javascript" || list[2].Language != "bash" {
		t.Errorf("contexts %+v, want the python and javascript defaults, then bash once used", list)
	}
}

// TestExecuteEnvVars: env_vars are set in the context before the code
// and undone after it: a key the sandbox was created with gets its value
// back, another is unset. The code the interpreter runs for itself
// streams nothing to the client.
func TestExecuteEnvVars(t *testing.T) {
	fake := &interpSessions{run: func(_ context.Context, req sandbox.ExecRequest, live sandbox.Stream) (spec.Result, error) {
		if live.Stdout != nil {
			_, _ = live.Stdout.Write([]byte("ran\n"))
		}
		return spec.Result{Value: "'own'"}, nil
	}}
	h := newInterpHarness(t, fake)
	lines := h.execute(`{"code":"x","env_vars":{"GLOBAL":"o","FOO":"it's"},"language":"bash"}`)
	if got := lineTypes(lines); got != "number_of_executions,stdout,result,end_of_execution" {
		t.Errorf("lines %s, want only the code's own", got)
	}
	execs := fake.recorded()
	if len(execs) != 3 {
		t.Fatalf("%d execs, want 3: set, code, undo", len(execs))
	}
	wants := []string{
		"export FOO='it'\\''s'\nexport GLOBAL='o'\n",
		"x",
		"export GLOBAL='g'\nunset FOO\n",
	}
	for i, want := range wants {
		if execs[i].Code != want || execs[i].Language != "bash" {
			t.Errorf("exec %d = %s %q, want bash %q", i, execs[i].Language, execs[i].Code, want)
		}
	}
}

// TestEnvCodeQuotes: the code that sets and undoes env_vars holds every
// value as a string literal of its language.
func TestEnvCodeQuotes(t *testing.T) {
	env := map[string]string{"A": `q"'\` + "\n"}
	tests := []struct{ lang, set, reset string }{
		{"python", `__import__('os').environ.update({"A":"q\"'\\\n"})`, `(lambda e: (e.update({}), [e.pop(k, None) for k in ["A"]]))(__import__('os').environ) and None`},
		{"javascript", `Object.assign(process.env, {"A":"q\"'\\\n"}); void 0`, `Object.assign(process.env, {}); for (const k of ["A"]) delete process.env[k]; void 0`},
		{"bash", "export A='q\"'\\''\\\n'\n", "unset A\n"},
	}
	for _, tt := range tests {
		code, err := codeFor(tt.lang)
		if err != nil {
			t.Fatal(err)
		}
		if got := code.setEnv(env); got != tt.set {
			t.Errorf("setEnvCode(%s) = %q, want %q", tt.lang, got, tt.set)
		}
		if got := resetEnvCode(code, []string{"A"}, nil); got != tt.reset {
			t.Errorf("resetEnvCode(%s) = %q, want %q", tt.lang, got, tt.reset)
		}
	}
}

// interpStatusError is an error that says its status, as server.HoldBody's do.
type interpStatusError struct{ status int }

func (e interpStatusError) Error() string   { return "request body did not arrive in time" }
func (e interpStatusError) HTTPStatus() int { return e.status }

// TestExecuteReadsBodiesWithTheServer: with Config.ReadBody the body is
// read by the server's reader for the sandbox's owner, its charge given
// back once decoded, and its refusal answered with its own status.
func TestExecuteReadsBodiesWithTheServer(t *testing.T) {
	var owners []string
	released := 0
	fail := false
	cfg := Config{ReadBody: func(_ http.ResponseWriter, r *http.Request, owner string, limit int64) ([]byte, func(), error) {
		owners = append(owners, owner)
		if fail {
			return nil, func() {}, interpStatusError{http.StatusRequestTimeout}
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, limit))
		return b, func() { released++ }, err
	}}
	h := newInterpHarnessWith(t, &interpSessions{}, cfg)
	h.execute(`{"code":"1"}`)
	if w := h.do(ciAlice, "POST", "/contexts", `{}`); w.Code != http.StatusOK {
		t.Errorf("POST /contexts = %d %q", w.Code, w.Body)
	}
	if strings.Join(owners, ",") != "alice,alice" || released != 2 {
		t.Errorf("bodies read for %q, %d released; want two of alice's, both released", owners, released)
	}
	fail = true
	if w := h.do(ciAlice, "POST", "/execute", `{"code":"1"}`); w.Code != http.StatusRequestTimeout || !strings.Contains(w.Body.String(), "in time") {
		t.Errorf("a body the server refused = %d %q, want its 408", w.Code, w.Body)
	}
}

// TestUnquoteRepr: a result's text loses its quotes exactly as E2B's
// server drops them (template/server/api/models/result.py: text that
// starts and ends with ' or with " loses its first and last character),
// a lone quote included, which Python's text[1:-1] makes empty.
func TestUnquoteRepr(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"'hi'", "hi"},
		{`"hi"`, "hi"},
		{`'it"s'`, `it"s`},
		{`"'"`, "'"},
		{"''", ""},
		{"'", ""},
		{`"`, ""},
		{"", ""},
		{"2", "2"},
		{"'a\"", "'a\""},
		{"[1, 'a']", "[1, 'a']"},
		{"'a' + 'b'", "a' + 'b"},
	} {
		if got := unquoteRepr(tc.in); got != tc.want {
			t.Errorf("unquoteRepr(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestContextCodeEveryLanguage: every language an interpreter runs has its
// context code, and a language without one is refused, not given bash's.
func TestContextCodeEveryLanguage(t *testing.T) {
	for _, lang := range interp.Languages() {
		if c, err := codeFor(lang); err != nil || c.chdir == nil || c.setEnv == nil || c.resetEnv == nil {
			t.Errorf("language %s has no complete row in contextCodes (err %v)", lang, err)
		}
	}
	if _, err := codeFor("cobol"); err == nil {
		t.Error("codeFor(cobol) = nil error, want one naming the language")
	}
}
