package interp

import (
	"encoding/base64"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

func TestPythonExit(t *testing.T) {
	it := newTest(t, "python")
	mustRun(t, it, "x = 1")
	r := mustRun(t, it, "import sys\nsys.exit(2)")
	if r.Exception == nil || r.Exception.Type != "SystemExit" || r.Exception.Message != "2" || r.Restarted {
		t.Errorf("sys.exit(2): exception %+v restarted %v, want SystemExit 2 and the interpreter kept", r.Exception, r.Restarted)
	}
	if r := mustRun(t, it, "x"); r.Value != "1" {
		t.Errorf("x after sys.exit = %q, want 1", r.Value)
	}

	r = mustRun(t, it, "import os\nprint('bye', flush=True)\nos._exit(3)")
	if !r.Restarted || r.ExitCode != 3 || r.Signal != 0 || r.stdout != "bye\n" {
		t.Errorf("os._exit(3): restarted %v exit %d signal %d stdout %q, want true 3 0 %q", r.Restarted, r.ExitCode, r.Signal, r.stdout, "bye\n")
	}
	if r := mustRun(t, it, "'x' in globals()"); r.Value != "False" || r.Restarted {
		t.Errorf("after os._exit: %q restarted %v, want a fresh interpreter", r.Value, r.Restarted)
	}
}

func TestPythonCapture(t *testing.T) {
	tests := []struct {
		name, code     string
		stdout, stderr string
	}{
		{"print", "print('a')\nprint('b', end='')", "a\nb", ""},
		{"stderr", "import sys\nsys.stderr.write('oops\\n')", "", "oops\n"},
		{"subprocess", "import os\nos.system('echo hi; echo err >&2')", "hi\n", "err\n"},
		{"fd level", "import os\nos.write(1, b'raw')", "raw", ""},
		{"stdin is empty", "import sys\nprint(repr(sys.stdin.read()))", "''\n", ""},
		{"protocol fds hidden", "import os\nfor fd in (3, 4):\n    try:\n        os.fstat(fd); print(fd, 'open')\n    except OSError:\n        print(fd, 'closed')",
			"3 closed\n4 closed\n", ""},
		{"protocol fds not inherited", "import subprocess\nprint(subprocess.run(['ls', '/proc/self/fd'], capture_output=True, text=True).stdout.split())",
			"['0', '1', '2', '3']\n", ""},
	}
	it := newTest(t, "python")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRun(t, it, tt.code)
			if r.Exception != nil {
				t.Fatalf("exception %+v", r.Exception)
			}
			if r.stdout != tt.stdout || r.stderr != tt.stderr {
				t.Errorf("stdout %q stderr %q, want %q %q", r.stdout, r.stderr, tt.stdout, tt.stderr)
			}
		})
	}
}

// TestPythonStdioRestored: a run that closes or redirects the output does
// not silence the next one.
func TestPythonStdioRestored(t *testing.T) {
	tests := []string{
		"import sys\nsys.stdout.close()",
		"import sys, io\nsys.stdout = io.StringIO()",
		"import os\nos.close(1)",
		"import os\nfd = os.open('/dev/null', os.O_WRONLY)\nos.dup2(fd, 1)\nos.dup2(fd, 2)",
		"import sys\nsys.__stdout__.close()\nsys.stderr.close()",
	}
	for _, code := range tests {
		t.Run(code, func(t *testing.T) {
			it := newTest(t, "python")
			mustRun(t, it, code)
			r := mustRun(t, it, "import os, sys\nprint('p')\nos.system('echo s')\nprint('e', file=sys.stderr)")
			if r.stdout != "p\ns\n" || r.stderr != "e\n" {
				t.Errorf("next run: stdout %q stderr %q, want %q %q", r.stdout, r.stderr, "p\ns\n", "e\n")
			}
		})
	}
}

func TestPythonRichOutputs(t *testing.T) {
	const rich = `class Rich:
    def _repr_html_(self): return "<b>hi</b>"
    def _repr_svg_(self): return "<svg></svg>"
    def __repr__(self): return "Rich()"
`
	tests := []struct {
		name, code string
		value      string
		want       []spec.Output
	}{
		{"display", rich + "display(Rich())\ndisplay(42)", "", []spec.Output{
			{MimeType: "image/svg+xml", Data: "<svg></svg>", Encoding: "utf-8"},
			{MimeType: "text/html", Data: "<b>hi</b>", Encoding: "utf-8"},
			{MimeType: "text/plain", Data: "42", Encoding: "utf-8"},
		}},
		{"trailing", rich + "Rich()", "Rich()", []spec.Output{
			{MimeType: "image/svg+xml", Data: "<svg></svg>", Encoding: "utf-8"},
			{MimeType: "text/html", Data: "<b>hi</b>", Encoding: "utf-8"},
		}},
		{"png bytes", "class P:\n    def _repr_png_(self): return b'\\x89PNG'\ndisplay(P())", "", []spec.Output{
			{MimeType: "image/png", Data: base64.StdEncoding.EncodeToString([]byte("\x89PNG")), Encoding: "base64"},
		}},
		{"json", "class J:\n    def _repr_json_(self): return {'a': 1}\ndisplay(J())", "", []spec.Output{
			{MimeType: "application/json", Data: `{"a": 1}`, Encoding: "utf-8"},
		}},
		{"plain value", "[1, 2]", "[1, 2]", nil},
	}
	it := newTest(t, "python")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRun(t, it, tt.code)
			if r.Exception != nil {
				t.Fatalf("exception %+v", r.Exception)
			}
			if r.Value != tt.value {
				t.Errorf("value %q, want %q", r.Value, tt.value)
			}
			if !equalOutputs(r.Outputs, tt.want) {
				t.Errorf("outputs %+v, want %+v", r.Outputs, tt.want)
			}
		})
	}
}

func equalOutputs(a, b []spec.Output) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPythonMatplotlib(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import matplotlib").Run(); err != nil {
		testhost.SkipOrFail(t, "/usr/bin/python3 has no matplotlib (apt-get install python3-matplotlib)")
	}
	it := newTest(t, "python")
	r := mustRun(t, it, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')\nfig, ax = plt.subplots()\nax.bar([1, 2], [3, 4])")
	if r.Exception != nil {
		t.Fatalf("exception %+v", r.Exception)
	}
	if len(r.Outputs) != 2 {
		t.Fatalf("got %d outputs, want 2 (one per figure); stderr %q", len(r.Outputs), r.stderr)
	}
	for i, o := range r.Outputs {
		png, err := base64.StdEncoding.DecodeString(o.Data)
		if o.MimeType != "image/png" || o.Encoding != "base64" || err != nil || !strings.HasPrefix(string(png), "\x89PNG\r\n\x1a\n") {
			t.Errorf("output %d: %s %s (decode error %v), want a base64 PNG", i, o.MimeType, o.Encoding, err)
		}
	}
	if r := mustRun(t, it, "len(plt.get_fignums())"); r.Value != "0" || len(r.Outputs) != 0 {
		t.Errorf("figures left open: %q, outputs %d", r.Value, len(r.Outputs))
	}
	if r := mustRun(t, it, "fig = plt.figure()\nplt.plot([1])\ndisplay(fig)"); len(r.Outputs) != 1 {
		t.Errorf("display(fig) gave %d outputs, want 1 (not repeated at the end)", len(r.Outputs))
	}
	if r := mustRun(t, it, "import sys\n'matplotlib' in sys.modules"); r.Value != "True" {
		t.Errorf("matplotlib not kept across runs: %q", r.Value)
	}
}

// TestPythonNoMatplotlibImport: the driver never imports matplotlib itself.
func TestPythonNoMatplotlibImport(t *testing.T) {
	r := mustRun(t, newTest(t, "python"), "import sys\n[m for m in sys.modules if m.startswith('matplotlib')]")
	if r.Value != "[]" {
		t.Errorf("modules loaded: %s, want none", r.Value)
	}
}

func TestOutputLimits(t *testing.T) {
	it := newTest(t, "python", WithMaxOutputBytes(1000), WithMaxTotalOutputBytes(1500), WithMaxValueBytes(100))
	r := mustRun(t, it, "class H:\n    def __init__(self, s): self.s = s\n    def _repr_html_(self): return self.s\n"+
		"display(H('a' * 2000))\ndisplay(H('b' * 900))\ndisplay(H('c' * 900))\n'v' * 500")
	if len(r.Outputs) != 1 || !strings.HasPrefix(r.Outputs[0].Data, "bbb") {
		t.Errorf("kept %d outputs, want only the b one", len(r.Outputs))
	}
	if !strings.Contains(r.stderr, "dropped (limit 1000)") || !strings.Contains(r.stderr, "limited to 1500 bytes") {
		t.Errorf("stderr %q does not say what was dropped", r.stderr)
	}
	if len(r.Value) > 200 || !strings.Contains(r.Value, "characters cut") {
		t.Errorf("value of %d bytes %q..., want it cut near 100", len(r.Value), r.Value[:min(len(r.Value), 20)])
	}
}

// TestPythonUndumpable: another process of the sandbox user cannot reach
// the driver's descriptors through /proc, though it can reach those of an
// ordinary process of that user (a child that has run, so its exec has
// made it dumpable).
func TestPythonUndumpable(t *testing.T) {
	sp := hostSpawner{dir: t.TempDir()}
	if os.Geteuid() == 0 {
		// Root may read any process's descriptors: run both as nobody.
		sp = hostSpawner{dir: "/", cred: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	pid := mustRun(t, newTestOn(t, sp, "python"), "import os\nos.getpid()").Value
	probe := newTestOn(t, sp, "python")
	r := mustRun(t, probe, "import os, subprocess\n"+
		"def fds(pid):\n"+
		"    try:\n        os.listdir('/proc/%d/fd' % pid)\n        return 'open'\n"+
		"    except PermissionError:\n        return 'denied'\n"+
		"child = subprocess.Popen(['sh', '-c', 'echo up; exec sleep 60'], stdout=subprocess.PIPE)\n"+
		"child.stdout.readline()\n"+
		"try:\n    seen = (fds(child.pid), fds("+pid+"))\n"+
		"finally:\n    child.kill()\n    child.wait()\n"+
		"seen")
	if r.Value != "('open', 'denied')" {
		t.Errorf("/proc/<pid>/fd of a child and of the driver: %s (exception %+v), want ('open', 'denied')", r.Value, r.Exception)
	}
}
