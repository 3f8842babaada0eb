package interp

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestOutputOrdering: all output of a run, including a subprocess's and
// output without a final newline, arrives before the run returns, and none
// of it shows up in the next run.
func TestOutputOrdering(t *testing.T) {
	tests := []struct {
		lang        string
		first, next string
	}{
		{"python", "import os, sys\nprint('a', end='')\nos.system('printf b; printf B >&2')\nsys.stderr.write('C')\nprint('c', end='')", "print('d', end='')"},
		{"bash", "printf a; (printf b; printf B >&2); printf C >&2; printf c", "printf d"},
		{"javascript", "process.stdout.write('a'); require('child_process').execSync('printf b; printf B >&2', {stdio: 'inherit'}); process.stderr.write('C'); process.stdout.write('c')", "process.stdout.write('d')"},
	}
	for _, tt := range tests {
		t.Run(tt.lang, func(t *testing.T) {
			it := newTest(t, tt.lang)
			for i := 0; i < 5; i++ {
				r := mustRun(t, it, tt.first)
				if r.stdout != "abc" || r.stderr != "BC" {
					t.Fatalf("run %d: stdout %q stderr %q, want %q %q", i, r.stdout, r.stderr, "abc", "BC")
				}
				r = mustRun(t, it, tt.next)
				if r.stdout != "d" || r.stderr != "" {
					t.Fatalf("run %d: next stdout %q stderr %q, want %q %q", i, r.stdout, r.stderr, "d", "")
				}
			}
		})
	}
}

// TestLargeOutput: several MiB on both streams and in a rich output at
// once do not deadlock the pipes, and arrive whole.
func TestLargeOutput(t *testing.T) {
	const n = 4 << 20
	tests := []struct {
		lang, code string
		outputs    int
	}{
		{"python", "import sys\nfor _ in range(64):\n    sys.stdout.write('o' * 65536)\n    sys.stderr.write('e' * 65536)\n" +
			"class H:\n    def _repr_html_(self): return 'h' * (3 << 20)\ndisplay(H())", 1},
		{"bash", "head -c 4194304 /dev/zero | tr '\\0' o & head -c 4194304 /dev/zero | tr '\\0' e >&2; wait", 0},
		{"javascript", "for (let i = 0; i < 64; i++) { process.stdout.write('o'.repeat(65536)); process.stderr.write('e'.repeat(65536)) }\n" +
			"display('h'.repeat(3 << 20), 'text/html')", 1},
	}
	for _, tt := range tests {
		t.Run(tt.lang, func(t *testing.T) {
			r := mustRun(t, newTest(t, tt.lang), tt.code)
			if r.Exception != nil {
				t.Fatalf("exception %+v", r.Exception)
			}
			if len(r.stdout) != n || strings.Trim(r.stdout, "o") != "" {
				t.Errorf("stdout: %d bytes, want %d of 'o'", len(r.stdout), n)
			}
			if len(r.stderr) != n || strings.Trim(r.stderr, "e") != "" {
				t.Errorf("stderr: %d bytes, want %d of 'e'", len(r.stderr), n)
			}
			if len(r.Outputs) != tt.outputs {
				t.Fatalf("%d outputs, want %d", len(r.Outputs), tt.outputs)
			}
			if tt.outputs > 0 && len(r.Outputs[0].Data) != 3<<20 {
				t.Errorf("rich output of %d bytes, want %d", len(r.Outputs[0].Data), 3<<20)
			}
		})
	}
}

func TestBash(t *testing.T) {
	tests := []struct {
		name, code     string
		stdout, stderr string
		exitCode       int
	}{
		{"stdin is empty", "read line; echo \"read $?\"", "read 1\n", "", 0},
		{"no trailing newline", "echo one\necho two", "one\ntwo\n", "", 0},
		{"heredoc", "cat <<'END'\n$HOME stays\nEND", "$HOME stays\n", "", 0},
		{"return", "return 5", "", "", 5},
		{"syntax error", "if then", "", "", 2},
		{"redirected for good", "exec >/dev/null 2>&1\necho hidden", "", "", 0},
		{"restored", "echo shown; echo e >&2", "shown\n", "e\n", 0},
		{"status", "(exit 7)", "", "", 7},
	}
	it := newTest(t, "bash")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRun(t, it, tt.code)
			stderr := r.stderr
			if tt.name == "syntax error" && strings.Contains(stderr, "syntax error") {
				stderr = ""
			}
			if r.stdout != tt.stdout || stderr != tt.stderr || r.ExitCode != tt.exitCode || r.Restarted {
				t.Errorf("stdout %q stderr %q exit %d restarted %v, want %q %q %d false",
					r.stdout, r.stderr, r.ExitCode, r.Restarted, tt.stdout, tt.stderr, tt.exitCode)
			}
		})
	}
}

func TestJavaScriptDisplay(t *testing.T) {
	r := mustRun(t, newTest(t, "javascript"), "display('<b>x</b>', 'text/html'); display(Buffer.from('PNG'), 'image/png'); display({a: 1}, 'application/json'); 3")
	want := []string{"text/html utf-8 <b>x</b>", "image/png base64 UE5H", `application/json utf-8 {"a":1}`}
	var got []string
	for _, o := range r.Outputs {
		got = append(got, o.MimeType+" "+o.Encoding+" "+o.Data)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || r.Value != "3" {
		t.Errorf("outputs %q value %q, want %q and 3", got, r.Value, want)
	}
}

// TestBashBreak: break and continue in the code cannot end the
// driver's loop.
func TestBashBreak(t *testing.T) {
	it := newTest(t, "bash")
	for _, code := range []string{"break", "continue", "break 2"} {
		r := mustRun(t, it, code+"\necho after")
		if r.stdout != "after\n" || r.Restarted {
			t.Errorf("%s: stdout %q restarted %v, want %q false", code, r.stdout, r.Restarted, "after\n")
		}
	}
}

// TestControlPipesHidden: processes the code starts do not inherit the
// request and reply pipes.
func TestControlPipesHidden(t *testing.T) {
	const list = "ls -1iL /proc/self/fd 2>/dev/null"
	tests := []struct{ lang, code string }{
		{"python", "import os\nos.system('" + list + "')"},
		{"bash", list},
		{"javascript", "require('child_process').execSync('" + list + "', {stdio: 'inherit'}); undefined"},
	}
	for _, tt := range tests {
		t.Run(tt.lang, func(t *testing.T) {
			it := newTest(t, tt.lang)
			r := mustRun(t, it, tt.code)
			p := it.(*interpreter).cur
			for _, f := range []*os.File{p.ctl, p.rep} {
				fi, err := f.Stat()
				if err != nil {
					t.Fatal(err)
				}
				ino := strconv.FormatUint(fi.Sys().(*syscall.Stat_t).Ino, 10)
				for _, line := range strings.Split(r.stdout, "\n") {
					if strings.Fields(line + " x")[0] == ino {
						t.Errorf("a child has a control pipe open: %q in\n%s", line, r.stdout)
					}
				}
			}
		})
	}
}
