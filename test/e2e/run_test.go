package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestRunExitStatus checks stdout/stderr capture and how the program's end
// is reported, both in the Result and as warden's own exit code.
func TestRunExitStatus(t *testing.T) {
	requireSandbox(t)
	tests := []struct {
		name       string
		script     string
		wantStdout string
		wantStderr string
		wantCode   int
		wantSignal string
	}{
		{"success with both streams", "echo out; echo err >&2", "out\n", "err\n", 0, ""},
		{"exit 3", "echo before; exit 3", "before\n", "", 3, ""},
		{"killed by SIGTERM", "kill -TERM $$", "", "", 128 + int(syscall.SIGTERM), "SIGTERM"},
		{"killed by SIGKILL", "kill -KILL $$", "", "", 128 + int(syscall.SIGKILL), "SIGKILL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sh(t, tt.script)
			if r.ExitCode != tt.wantCode || r.Signal != tt.wantSignal {
				t.Errorf("json: exit_code %d signal %q, want %d %q", r.ExitCode, r.Signal, tt.wantCode, tt.wantSignal)
			}
			if r.Stdout != tt.wantStdout || r.Stderr != tt.wantStderr {
				t.Errorf("json: stdout %q stderr %q, want %q %q", r.Stdout, r.Stderr, tt.wantStdout, tt.wantStderr)
			}
			if r.TimedOut || r.OOMKilled || r.Error != "" {
				t.Errorf("json: timed_out %v oom_killed %v error %q, want false false \"\"", r.TimedOut, r.OOMKilled, r.Error)
			}
			inv := warden(t, "", "run", "--", "sh", "-c", tt.script)
			if inv.code != tt.wantCode {
				t.Errorf("streaming: exit code %d, want %d", inv.code, tt.wantCode)
			}
			if inv.stdout != tt.wantStdout || inv.stderr != tt.wantStderr {
				t.Errorf("streaming: stdout %q stderr %q, want %q %q", inv.stdout, inv.stderr, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

// TestRunSignalDispositionsAreDefault checks that the program starts with
// no signal ignored or blocked: dispositions Warden's init chose for itself
// must not leak into the user's code (an ignored SIGTERM would make the
// program unkillable by its own children and break "kill -TERM").
func TestRunSignalDispositionsAreDefault(t *testing.T) {
	requireSandbox(t)
	r := runJSON(t, "--", "grep", "-E", "^Sig(Ign|Blk):", "/proc/self/status")
	want := "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"
	if r.ExitCode != 0 || r.Stdout != want {
		t.Errorf("signal masks of a fresh program: %q, want %q (stderr %q)", r.Stdout, want, r.Stderr)
	}
}

// TestRunStdinPassesThrough checks that warden's stdin reaches the program,
// all of it, including more than a pipe buffer holds.
func TestRunStdinPassesThrough(t *testing.T) {
	requireSandbox(t)
	big := strings.Repeat("0123456789abcdef", 64*1024) // 1 MiB
	tests := []struct {
		name  string
		stdin string
		cmd   []string
		want  string
	}{
		{"cat echoes stdin", "hello\nworld\n", []string{"cat"}, "hello\nworld\n"},
		{"empty stdin is EOF", "", []string{"cat"}, ""},
		{"1 MiB through wc", big, []string{"wc", "-c"}, strconv.Itoa(len(big)) + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := warden(t, tt.stdin, append([]string{"run", "--"}, tt.cmd...)...)
			if inv.code != 0 || inv.stdout != tt.want {
				t.Errorf("warden run -- %q: exit %d stdout %q, want 0 %q (stderr %q)", tt.cmd, inv.code, inv.stdout, tt.want, inv.stderr)
			}
		})
	}
}

// TestRunStreamingMatchesJSON checks that the live streams carry the same
// bytes as the Result, and that the exit code agrees.
func TestRunStreamingMatchesJSON(t *testing.T) {
	requireSandbox(t)
	script := `i=0; while [ $i -lt 200 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done; printf 'no newline'; exit 7`
	r := sh(t, script)
	inv := warden(t, "", "run", "--", "sh", "-c", script)
	if inv.stdout != r.Stdout {
		t.Errorf("streamed stdout (%d bytes) differs from json stdout (%d bytes)", len(inv.stdout), len(r.Stdout))
	}
	if inv.stderr != r.Stderr {
		t.Errorf("streamed stderr (%d bytes) differs from json stderr (%d bytes)", len(inv.stderr), len(r.Stderr))
	}
	if inv.code != 7 || r.ExitCode != 7 {
		t.Errorf("exit codes: streaming %d, json %d, want 7 and 7", inv.code, r.ExitCode)
	}
	if !strings.HasPrefix(r.Stdout, "out 0\nout 1\n") || !strings.HasSuffix(r.Stdout, "out 199\nno newline") {
		t.Errorf("json stdout is not the program's output: %.60q ... %.60q", r.Stdout, r.Stdout[max(0, len(r.Stdout)-60):])
	}
}

// TestRunEnvironmentIsClean checks that nothing of warden's own environment
// reaches the program, that the base environment is there, and that --env
// adds to it and overrides it.
func TestRunEnvironmentIsClean(t *testing.T) {
	requireSandbox(t)
	secret := "WARDEN_E2E_HOST_SECRET"
	value := rand.Text()
	t.Setenv(secret, value)
	tests := []struct {
		name    string
		flags   []string
		want    []string // exact KEY=VALUE lines
		wantNot []string // substrings that must not appear
	}{
		{
			name:    "host variable does not leak",
			want:    []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/sandbox"},
			wantNot: []string{secret, value, "GOPATH=", "GOROOT="},
		},
		{
			name:  "env adds and overrides",
			flags: []string{"--env", "FOO=bar baz", "--env", "HOME=/tmp", "--env", "EMPTY="},
			want:  []string{"FOO=bar baz", "HOME=/tmp", "EMPTY=", "PATH=/usr/local/bin:/usr/bin:/bin"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runJSON(t, append(tt.flags, "--", "env")...)
			if r.ExitCode != 0 {
				t.Fatalf("env: exit %d, stderr %q", r.ExitCode, r.Stderr)
			}
			lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
			for _, w := range tt.want {
				if !slices.Contains(lines, w) {
					t.Errorf("environment lacks %q:\n%s", w, r.Stdout)
				}
				key, _, _ := strings.Cut(w, "=")
				n := 0
				for _, l := range lines {
					if strings.HasPrefix(l, key+"=") {
						n++
					}
				}
				if n != 1 {
					t.Errorf("environment has %s %d times, want once:\n%s", key, n, r.Stdout)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(r.Stdout, w) {
					t.Errorf("environment contains host's %q:\n%s", w, r.Stdout)
				}
			}
		})
	}
}

// TestRunIdentity checks who and where the program is.
func TestRunIdentity(t *testing.T) {
	requireSandbox(t)
	tests := []struct {
		name string
		cmd  []string
		want string
	}{
		{"uid", []string{"id", "-u"}, "1000\n"},
		{"gid", []string{"id", "-g"}, "1000\n"},
		{"user name", []string{"id", "-un"}, "sandbox\n"},
		{"no supplementary groups", []string{"id", "-G"}, "1000\n"},
		{"hostname", []string{"hostname"}, "sandbox\n"},
		{"cwd", []string{"pwd"}, "/workspace\n"},
		{"home", []string{"sh", "-c", `echo "$HOME"`}, "/home/sandbox\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runJSON(t, append([]string{"--"}, tt.cmd...)...)
			if r.ExitCode != 0 || r.Stdout != tt.want {
				t.Errorf("%q: exit %d stdout %q, want 0 %q (stderr %q)", tt.cmd, r.ExitCode, r.Stdout, tt.want, r.Stderr)
			}
		})
	}
}

// TestRunResultJSONFields checks the Result's field names, which are a
// contract, their JSON types and that the measured values are sane.
func TestRunResultJSONFields(t *testing.T) {
	requireSandbox(t)
	inv := warden(t, "", "run", "--json", "--", "sh", "-c", "echo hi; head -c 4000000 /dev/zero > /tmp/x")
	if inv.code != 0 {
		t.Fatalf("exit code %d, want 0 (stderr %q)", inv.code, inv.stderr)
	}
	if strings.Count(inv.stdout, "\n") != 1 {
		t.Errorf("stdout holds %d lines, want one JSON object: %q", strings.Count(inv.stdout, "\n"), inv.stdout)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(inv.stdout), &m); err != nil {
		t.Fatalf("stdout %q is not JSON: %v", inv.stdout, err)
	}
	fields := map[string]string{
		"exit_code": "number", "signal": "string", "timed_out": "bool", "oom_killed": "bool",
		"stdout": "string", "stderr": "string", "stdout_truncated": "bool", "stderr_truncated": "bool",
		"wall_time_ms": "number", "cpu_time_ms": "number", "peak_memory_bytes": "number", "error": "string",
	}
	for k, typ := range fields {
		v, ok := m[k]
		if !ok {
			t.Errorf("Result lacks field %q", k)
			continue
		}
		got := "?"
		switch v.(type) {
		case float64:
			got = "number"
		case string:
			got = "string"
		case bool:
			got = "bool"
		}
		if got != typ {
			t.Errorf("field %q is a %s (%v), want a %s", k, got, v, typ)
		}
	}
	for k := range m {
		if _, ok := fields[k]; !ok {
			t.Errorf("Result has field %q that is not in the contract", k)
		}
	}
	num := func(k string) float64 { f, _ := m[k].(float64); return f }
	if num("wall_time_ms") <= 0 {
		t.Errorf("wall_time_ms = %v, want > 0", m["wall_time_ms"])
	}
	if num("cpu_time_ms") <= 0 {
		t.Errorf("cpu_time_ms = %v, want > 0 (the program ran head and a shell)", m["cpu_time_ms"])
	}
	// The program wrote 4 MB to the tmpfs, which is charged to it.
	if num("peak_memory_bytes") < 4e6 {
		t.Errorf("peak_memory_bytes = %v, want at least the 4 MB written to tmpfs", m["peak_memory_bytes"])
	}
	if m["stdout"] != "hi\n" || m["exit_code"] != 0.0 || m["error"] != "" || m["signal"] != "" {
		t.Errorf("stdout %q exit_code %v error %q signal %q, want \"hi\\n\" 0 \"\" \"\"", m["stdout"], m["exit_code"], m["error"], m["signal"])
	}
}

// TestRunPythonPlotToWorkspace runs the data-analysis case end to end:
// numpy and matplotlib draw a plot into a host --workspace, and the host
// gets a valid PNG owned by the workspace directory's owner (not by the
// sandbox's pool uid). The ownership part needs the idmapped workspace mount.
func TestRunPythonPlotToWorkspace(t *testing.T) {
	requireSandbox(t)
	dir := hostWorkspace(t, t.TempDir())
	var dirSt syscall.Stat_t
	if err := syscall.Stat(dir, &dirSt); err != nil {
		t.Fatal(err)
	}
	script := `
import numpy as np
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
x = np.linspace(0, 2 * np.pi, 200)
plt.plot(x, np.sin(x))
plt.savefig("plot.png")
print("saved", np.round(np.sin(np.pi / 2), 3))
`
	r := runJSON(t, "--workspace", dir, "--timeout", "60s", "--", "python3", "-c", script)
	if r.ExitCode != 0 || r.Stdout != "saved 1.0\n" {
		t.Fatalf("python: exit %d stdout %q, want 0 %q\nstderr: %s", r.ExitCode, r.Stdout, "saved 1.0\n", r.Stderr)
	}
	png := filepath.Join(dir, "plot.png")
	b, err := os.ReadFile(png)
	if err != nil {
		t.Fatalf("the host does not see the plot in the workspace: %v", err)
	}
	if sig := []byte("\x89PNG\r\n\x1a\n"); !bytes.HasPrefix(b, sig) {
		t.Errorf("plot.png (%d bytes) starts with %q, want the PNG signature %q", len(b), b[:min(8, len(b))], sig)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(png, &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != dirSt.Uid || st.Gid != dirSt.Gid {
		t.Errorf("plot.png is owned by %d:%d on the host, want the workspace owner %d:%d", st.Uid, st.Gid, dirSt.Uid, dirSt.Gid)
	}
}

// TestRunWorkspaceOwnership checks the --workspace identity mapping: inside,
// the directory belongs to the sandbox user; on the host, what the sandbox
// creates belongs to the directory's owner, whoever that is, and never to
// the sandbox's pool uid.
func TestRunWorkspaceOwnership(t *testing.T) {
	requireSandbox(t)
	tests := []struct {
		name     string
		uid, gid int
	}{
		{"owned by an ordinary user", 4242, 4343},
		{"owned by another user", 1000, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Chown(dir, tt.uid, tt.gid); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			r := sh(t, `stat -c %u:%g /workspace && echo data > file && mkdir sub && echo more > sub/file`, "--workspace", dir)
			if r.ExitCode != 0 || r.Stdout != "1000:1000\n" {
				t.Fatalf("inside: exit %d stdout %q, want 0 and /workspace owned by 1000:1000 (stderr %q)", r.ExitCode, r.Stdout, r.Stderr)
			}
			for _, name := range []string{"file", "sub", "sub/file"} {
				var st syscall.Stat_t
				if err := syscall.Lstat(filepath.Join(dir, name), &st); err != nil {
					t.Errorf("the host does not see %s: %v", name, err)
					continue
				}
				if int(st.Uid) != tt.uid || int(st.Gid) != tt.gid {
					t.Errorf("%s is owned by %d:%d on the host, want the workspace owner %d:%d", name, st.Uid, st.Gid, tt.uid, tt.gid)
				}
			}
		})
	}
}

// TestRunWorkspaceRefused checks the two workspaces Warden will not mount:
// one owned by root, user or group (as root, the sandbox would write as root on the host:
// --workspace / would hand it the machine) and one reached through a
// symbolic link (an earlier sandbox could have planted it to redirect the
// next run's workspace to /etc).
func TestRunWorkspaceRefused(t *testing.T) {
	requireSandbox(t)
	rootOwned := t.TempDir()
	if err := os.Chmod(rootOwned, 0o755); err != nil {
		t.Fatal(err)
	}
	rootGroup := t.TempDir()
	if err := os.Chown(rootGroup, workspaceOwner, 0); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(hostWorkspace(t, t.TempDir()), "out")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir, want string
	}{
		{"owned by root", rootOwned, "owned by root"},
		{"group root", rootGroup, "owned by root"},
		{"through a symbolic link", link, "symbolic link"},
		{"root of the host", "/", "owned by root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := warden(t, "", "run", "--workspace", tt.dir, "--", "true")
			if inv.code != 125 || !strings.Contains(inv.stderr, tt.want) || strings.Count(inv.stderr, "\n") != 1 {
				t.Errorf("exit %d stderr %q, want 125 and one line containing %q", inv.code, inv.stderr, tt.want)
			}
		})
	}
}

// TestRunNoStateLeaksBetweenRuns checks that each run starts from a fresh
// file system: what one run writes to any writable place is gone in the next.
func TestRunNoStateLeaksBetweenRuns(t *testing.T) {
	requireSandbox(t)
	files := []string{"/tmp/x", "/workspace/x", "/home/sandbox/x", "/dev/shm/x"}
	write := "set -e; for f in " + strings.Join(files, " ") + "; do echo secret > $f; done; cat " + strings.Join(files, " ")
	r := sh(t, write)
	if r.ExitCode != 0 || r.Stdout != strings.Repeat("secret\n", len(files)) {
		t.Fatalf("run 1 could not write its files: exit %d stdout %q stderr %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	check := "for f in " + strings.Join(files, " ") + "; do if [ -e $f ]; then echo $f; fi; done"
	r = sh(t, check)
	if r.ExitCode != 0 || r.Stdout != "" {
		t.Errorf("run 2 sees files of run 1: exit %d, found %q, want none (stderr %q)", r.ExitCode, r.Stdout, r.Stderr)
	}
}

// TestRunOutputLimit floods each stream with 50 MiB under a 1 KiB limit:
// the program must finish normally (its output is drained, never blocked),
// exactly the limit is kept, and only the flooded stream is marked.
func TestRunOutputLimit(t *testing.T) {
	requireSandbox(t)
	const limit = 1024
	flood := "yes 0123456789 | head -c 52428800"
	tests := []struct {
		name   string
		script string
		stderr bool // the flood goes to stderr
	}{
		{"stdout flood", flood, false},
		{"stderr flood", flood + " >&2", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sh(t, tt.script, "--output-limit", "1KiB", "--timeout", "60s")
			flooded, quiet := r.Stdout, r.Stderr
			fTrunc, qTrunc := r.StdoutTruncated, r.StderrTruncated
			if tt.stderr {
				flooded, quiet, fTrunc, qTrunc = r.Stderr, r.Stdout, r.StderrTruncated, r.StdoutTruncated
			}
			if r.ExitCode != 0 || r.TimedOut {
				t.Errorf("json: exit %d timed_out %v, want 0 false", r.ExitCode, r.TimedOut)
			}
			if len(flooded) != limit || !strings.HasPrefix(flooded, "0123456789\n") {
				t.Errorf("json: flooded stream holds %d bytes starting %.20q, want exactly %d of the program's", len(flooded), flooded, limit)
			}
			if !fTrunc || qTrunc {
				t.Errorf("json: flooded stream truncated %v, other %v; want true, false", fTrunc, qTrunc)
			}
			if quiet != "" {
				t.Errorf("json: the quiet stream holds %q, want nothing", quiet)
			}

			inv := warden(t, "", "run", "--output-limit", "1KiB", "--timeout", "60s", "--", "sh", "-c", tt.script)
			if inv.code != 0 {
				t.Errorf("streaming: exit code %d, want 0", inv.code)
			}
			streamed, note := inv.stdout, inv.stderr
			if tt.stderr {
				streamed, note = inv.stderr[:min(limit, len(inv.stderr))], inv.stderr[min(limit, len(inv.stderr)):]
				if inv.stdout != "" {
					t.Errorf("streaming: stdout %q, want nothing", inv.stdout)
				}
			}
			if len(streamed) != limit || !strings.HasPrefix(streamed, "0123456789\n") {
				t.Errorf("streaming: %d bytes of the flooded stream reached warden's caller, want exactly %d", len(streamed), limit)
			}
			if strings.Count(note, "\n") != 1 || !strings.Contains(note, "truncated") {
				t.Errorf("streaming: stderr note after the output is %q, want one line saying it was truncated", note)
			}
		})
	}
}

// TestRunStartFailures checks that a program that cannot start is the
// program's failure (exit 127 or 126 with a reason), not Warden's (125).
func TestRunStartFailures(t *testing.T) {
	requireSandbox(t)
	ws := hostWorkspace(t, t.TempDir())
	scripts := map[string]string{
		"hello.sh": "#!/bin/sh\necho hello\n",
		"nointerp": "#!/nonexistent/interpreter\n",
		"notexec":  "echo never\n",
	}
	for name, body := range scripts {
		mode := os.FileMode(0o755)
		if name == "notexec" {
			mode = 0o644
		}
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		cmd      string
		code     int
		stdout   string
		inStderr string
	}{
		{"relative path runs from /workspace", "./hello.sh", 0, "hello\n", ""},
		{"missing interpreter", "./nointerp", 127, "", "nointerp"},
		{"not executable", "./notexec", 126, "", "notexec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runJSON(t, "--workspace", ws, "--", tt.cmd)
			if r.Error != "" || r.ExitCode != tt.code || r.Stdout != tt.stdout || !strings.Contains(r.Stderr, tt.inStderr) {
				t.Errorf("exit %d stdout %q stderr %q error %q, want exit %d stdout %q and stderr naming %q",
					r.ExitCode, r.Stdout, r.Stderr, r.Error, tt.code, tt.stdout, tt.inStderr)
			}
		})
	}
}
