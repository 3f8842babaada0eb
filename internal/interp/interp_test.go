package interp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNewUnknownLanguage(t *testing.T) {
	_, err := New("cobol", hostSpawner{dir: t.TempDir()}, testEnv)
	if !errors.Is(err, ErrUnknownLanguage) {
		t.Fatalf("New(cobol) error = %v, want ErrUnknownLanguage", err)
	}
	for _, lang := range Languages() {
		if !strings.Contains(err.Error(), lang) {
			t.Errorf("error %q does not list %q", err, lang)
		}
	}
	if got, want := Languages(), []string{"python", "bash", "javascript"}; !slices.Equal(got, want) {
		t.Errorf("Languages() = %v, want %v", got, want)
	}
}

// TestOneShotArgv: every language runs one-shot code through its own
// interpreter, the code last, with the session interpreter's default
// environment (keys the request sets win), and an unknown one is refused
// naming those that are known.
func TestOneShotArgv(t *testing.T) {
	want := map[string][]string{
		"python":     {"python3", "-c", "1"},
		"bash":       {"bash", "-c", "1"},
		"javascript": {"node", "-e", "1"},
	}
	for _, lang := range Languages() {
		got, _, err := OneShotArgv(lang, "1", nil)
		if err != nil || !slices.Equal(got, want[lang]) {
			t.Errorf("OneShotArgv(%q) = %q, %v; want %q", lang, got, err, want[lang])
		}
	}
	if len(want) != len(Languages()) {
		t.Errorf("Languages() = %v; the table here has %d", Languages(), len(want))
	}
	envs := []struct {
		lang    string
		env     []string
		wantEnv []string
	}{
		{"python", nil, []string{"MPLBACKEND=Agg", "PYTHONIOENCODING=utf-8"}},
		{"python", []string{"MPLBACKEND=svg", "A=1"}, []string{"MPLBACKEND=svg", "A=1", "PYTHONIOENCODING=utf-8"}},
		{"bash", []string{"A=1"}, []string{"A=1"}},
	}
	for _, tt := range envs {
		_, got, err := OneShotArgv(tt.lang, "1", tt.env)
		if err != nil || !slices.Equal(got, tt.wantEnv) {
			t.Errorf("OneShotArgv(%q, env %q) env = %q, %v; want %q", tt.lang, tt.env, got, err, tt.wantEnv)
		}
	}
	if _, _, err := OneShotArgv(strings.Repeat("x", 1000), "1", nil); err == nil || len(err.Error()) > 200 {
		t.Errorf("OneShotArgv(a 1000-byte language) error = %v, want a short one that cuts the name", err)
	}
	_, _, err := OneShotArgv("cobol", "1", nil)
	if !errors.Is(err, ErrUnknownLanguage) || !strings.Contains(err.Error(), strings.Join(Languages(), ", ")) {
		t.Errorf("OneShotArgv(cobol) error = %v, want ErrUnknownLanguage listing %v", err, Languages())
	}
}

// step is one Run in a scripted session and what it must give.
type step struct {
	code      string
	value     string
	stdout    string
	exitCode  int
	restarted bool
	// started: this run starts a new interpreter process.
	started bool
}

func TestStatePersists(t *testing.T) {
	tests := []struct {
		lang  string
		steps []step
	}{
		{"python", []step{
			{code: "import math\nx = 41", value: "", started: true},
			{code: "def f(): return x + 1\nf()", value: "42"},
			{code: "print(math.pi > 3, __name__)", stdout: "True __main__\n"},
		}},
		{"bash", []step{
			{code: "cd /tmp\nexport GREETING=hi\nn=3", started: true},
			{code: "echo \"$PWD $GREETING $n\"", stdout: "/tmp hi 3\n"},
			{code: "f() { echo \"f$1\"; }"},
			{code: "f 1; false", stdout: "f1\n", exitCode: 1},
			{code: "exit 4", exitCode: 4, restarted: true},
			{code: "echo \"[$GREETING]\"", stdout: "[]\n", started: true},
		}},
		{"javascript", []step{
			{code: "let a = 1; const b = 2; var c = 3; function f() { return a + b + c }", started: true},
			{code: "a += 10; f()", value: "16"},
			{code: "console.log(typeof require, [a, b, c])", stdout: "function [ 11, 2, 3 ]\n"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.lang, func(t *testing.T) {
			it := newTest(t, tt.lang)
			for i, s := range tt.steps {
				r := mustRun(t, it, s.code)
				if r.Exception != nil {
					t.Fatalf("step %d: exception %+v", i, r.Exception)
				}
				if r.Value != s.value || r.stdout != s.stdout || r.ExitCode != s.exitCode || r.Restarted != s.restarted || r.Started != s.started {
					t.Errorf("step %d (%q): got value %q stdout %q exit %d restarted %v started %v, want %q %q %d %v %v",
						i, s.code, r.Value, r.stdout, r.ExitCode, r.Restarted, r.Started, s.value, s.stdout, s.exitCode, s.restarted, s.started)
				}
			}
		})
	}
}

func TestTrailingValue(t *testing.T) {
	tests := []struct {
		lang, code, want string
	}{
		{"python", "1 + 1", "2"},
		{"python", "'a' * 3", "'aaa'"},
		{"python", "None", ""},
		{"python", "x = 5", ""},
		{"python", "for i in range(2): pass", ""},
		{"python", "import asyncio\nawait asyncio.sleep(0, result=7)", "7"},
		{"javascript", "1 + 1", "2"},
		{"javascript", "'a'.repeat(3)", "'aaa'"},
		{"javascript", "undefined", ""},
		{"javascript", "({k: [1]})", "{ k: [ 1 ] }"},
		{"javascript", "Promise.resolve(7)", "7"},
		{"javascript", "new Promise(r => setTimeout(() => r('late'), 10))", "'late'"},
	}
	for _, tt := range tests {
		t.Run(tt.lang+"/"+tt.code, func(t *testing.T) {
			r := mustRun(t, newTest(t, tt.lang), tt.code)
			if r.Exception != nil {
				t.Fatalf("exception %+v", r.Exception)
			}
			if r.Value != tt.want {
				t.Errorf("value = %q, want %q", r.Value, tt.want)
			}
		})
	}
}

func TestExceptions(t *testing.T) {
	tests := []struct {
		name, lang, code string
		typ, message     string
		traceback        []string // substrings the traceback must hold
	}{
		{"python raise", "python", "def boom():\n    return 1 / 0\nboom()", "ZeroDivisionError", "division by zero",
			[]string{"Traceback", "in boom", "return 1 / 0", "ZeroDivisionError: division by zero"}},
		{"python custom", "python", "class E(Exception): pass\nraise E('bad thing')", "E", "bad thing", []string{"E: bad thing"}},
		{"python syntax", "python", "def f(:\n  pass", "SyntaxError", "invalid syntax", []string{"def f(:", "^"}},
		{"python input", "python", "input()", "EOFError", "EOF when reading a line", []string{"EOFError"}},
		{"javascript throw", "javascript", "function boom() { throw new TypeError('bad') }\nboom()", "TypeError", "bad",
			[]string{"TypeError: bad", "at boom"}},
		{"javascript syntax", "javascript", "let = ;", "SyntaxError", "Unexpected token", []string{"let = ;"}},
		{"javascript rejected", "javascript", "Promise.reject(new RangeError('nope'))", "RangeError", "nope", []string{"RangeError: nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRun(t, newTest(t, tt.lang), tt.code)
			e := r.Exception
			if e == nil {
				t.Fatalf("no exception; value %q stderr %q", r.Value, r.stderr)
			}
			if e.Type != tt.typ || !strings.Contains(e.Message, tt.message) {
				t.Errorf("exception %s: %q, want %s: %q", e.Type, e.Message, tt.typ, tt.message)
			}
			for _, s := range tt.traceback {
				if !strings.Contains(e.Traceback, s) {
					t.Errorf("traceback %q does not hold %q", e.Traceback, s)
				}
			}
			for _, s := range []string{"python_driver", "_execute", "[eval]", "node:internal", "<string>"} {
				if strings.Contains(e.Traceback, s) {
					t.Errorf("traceback %q shows driver frame %q", e.Traceback, s)
				}
			}
			if r.Restarted {
				t.Errorf("Restarted after an exception")
			}
		})
	}
}

// TestCancel stops a run that is known to be running (its output has
// arrived) and checks that the output seen is kept and the next run gets
// a fresh interpreter.
func TestCancel(t *testing.T) {
	tests := []struct {
		lang, setup, code, check, want string
	}{
		{"python", "x = 1", "print('started', flush=True)\nimport time\ntime.sleep(60)", "'x' in globals()", "False"},
		{"bash", "x=1", "echo started; sleep 60", "echo \"[$x]\"", ""},
		{"javascript", "var x = 1", "console.log('started'); while (true) {}", "typeof x", "'undefined'"},
	}
	for _, tt := range tests {
		t.Run(tt.lang, func(t *testing.T) {
			it := newTest(t, tt.lang)
			mustRun(t, it, tt.setup)
			ctx, cancel := context.WithTimeout(context.Background(), testRunTimeout)
			defer cancel()
			out := &cancelOn{marker: "started\n", cancel: cancel}
			o, err := it.Run(ctx, tt.code, out, nil)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !o.Restarted || o.TimedOut || o.Signal != 9 {
				t.Errorf("restarted %v timed out %v signal %d, want true false 9", o.Restarted, o.TimedOut, o.Signal)
			}
			if got := out.String(); got != "started\n" {
				t.Errorf("stdout %q, want %q", got, "started\n")
			}
			r := mustRun(t, it, tt.check)
			if r.Value != tt.want {
				t.Errorf("after restart %q gave %q, want %q", tt.check, r.Value, tt.want)
			}
		})
	}
}

// TestDeadline checks that a deadline kills the interpreter and says so.
func TestDeadline(t *testing.T) {
	for _, lang := range []string{"python", "bash", "javascript"} {
		t.Run(lang, func(t *testing.T) {
			it := newTest(t, lang)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			code := map[string]string{"python": "while True: pass", "bash": "while :; do :; done", "javascript": "for (;;) {}"}[lang]
			r := mustRunCtx(t, ctx, it, code)
			if !r.TimedOut || !r.Restarted {
				t.Errorf("timed out %v restarted %v, want both", r.TimedOut, r.Restarted)
			}
			if r := mustRun(t, it, map[string]string{"python": "2*3", "bash": "echo 6", "javascript": "2*3"}[lang]); r.Value+r.stdout != map[string]string{"python": "6", "bash": "6\n", "javascript": "6"}[lang] {
				t.Errorf("after the timeout: value %q stdout %q", r.Value, r.stdout)
			}
		})
	}
}

func TestClose(t *testing.T) {
	it := newTest(t, "bash")
	mustRun(t, it, "true")
	if err := it.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := it.Run(context.Background(), "true", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
	if err := it.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStartFailure(t *testing.T) {
	tests := []struct {
		name string
		lang *language
		want string
	}{
		{"missing", &language{name: "nothing", program: "warden-no-such-program", send: writeJSONRequest}, "warden-no-such-program"},
		{"exits", &language{name: "dies", program: "bash", args: []string{"-c", "echo broken >&2; exit 3"}, send: writeJSONRequest}, "status 3 before it was ready: broken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := newInterpreter(tt.lang, hostSpawner{dir: t.TempDir()}, testEnv, config{maxOutput: 1 << 20, maxTotalOutput: 1 << 20, maxValue: 1 << 20})
			defer it.Close()
			ctx, cancel := context.WithTimeout(context.Background(), testRunTimeout)
			defer cancel()
			o, err := it.Run(ctx, "1", nil, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !o.Started {
				t.Errorf("Run = started %v, error %v; want started (a start was tried) and an error holding %q", o.Started, err, tt.want)
			}
		})
	}
}

// TestCloseDuringRun: Close kills a running interpreter at once; the Run
// ends with Restarted and later Runs fail with ErrClosed.
func TestCloseDuringRun(t *testing.T) {
	it := newTest(t, "python")
	out := &cancelOn{marker: "started\n", cancel: func() { go it.Close() }}
	ctx, cancel := context.WithTimeout(context.Background(), testRunTimeout)
	defer cancel()
	o, err := it.Run(ctx, "print('started')\nimport time\ntime.sleep(60)", out, nil)
	if err != nil || !o.Restarted || o.TimedOut {
		t.Errorf("Run: restarted %v timed out %v err %v, want true false nil", o.Restarted, o.TimedOut, err)
	}
	if err := it.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := it.Run(ctx, "1", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
}

// TestConcurrentRuns: Runs on one interpreter are serialised, so each
// gets exactly its own output.
func TestConcurrentRuns(t *testing.T) {
	it := newTest(t, "python")
	const n = 8
	errs := make(chan string, n)
	for i := range n {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), testRunTimeout)
			defer cancel()
			var out syncBuffer
			o, err := it.Run(ctx, fmt.Sprintf("print(%d)\n%d", i, i), &out, nil)
			want := fmt.Sprint(i)
			if err != nil || o.Value != want || out.String() != want+"\n" {
				errs <- fmt.Sprintf("run %d: value %q stdout %q err %v", i, o.Value, out.String(), err)
				return
			}
			errs <- ""
		}()
	}
	for range n {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}

// TestNewUnsupported: a language whose interpreter the host lacks fails
// in New, not on the first Run.
func TestNewUnsupported(t *testing.T) {
	i := slices.IndexFunc(languages, func(l *language) bool { return l.name == "javascript" })
	saved := languages[i]
	t.Cleanup(func() { languages[i] = saved })
	languages[i] = &language{name: "javascript", program: "node", hostPaths: []string{"/nonexistent/node"}, send: writeJSONRequest}
	_, err := New("javascript", hostSpawner{dir: t.TempDir()}, testEnv)
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "/nonexistent/node") {
		t.Errorf("New error = %v, want ErrUnsupported naming where node was looked for", err)
	}
}
