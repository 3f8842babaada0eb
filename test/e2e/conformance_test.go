package e2e

import (
	"flag"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/gvisor"
	"github.com/warden-sandbox/warden/internal/microvm"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// backendFlag picks the backends the conformance suite runs on; empty
// means every backend Warden has (WARDEN_BACKENDS may set it too).
var backendFlag = flag.String("backend", "", "comma-separated backends for the conformance suite (default: all)")

// allBackends are the backends built so far.
var allBackends = []string{"native", "gvisor", "docker", "microvm"}

// conformanceBackends lists the backends to test, each checked usable
// here: a missing runtime skips, or fails in CI.
func conformanceBackends(t *testing.T) []string {
	t.Helper()
	requireSandbox(t)
	list := *backendFlag
	if list == "" {
		list = os.Getenv("WARDEN_BACKENDS")
	}
	names := allBackends
	if list != "" {
		names = strings.Split(list, ",")
	}
	return names
}

// nativeStream is the session rows' name for native with the agent
// protocol over one byte stream (--agent-transport stream), the path a VM
// or pod backend needs: it runs wherever native does.
const nativeStream = "native-stream"

// gvisorFD is the row of gVisor with the agent protocol over descriptors
// (--agent-transport fd): the gvisor row is over the stream, gVisor's
// default, which keeps the host's descriptors out of the box for a
// memory checkpoint; this row keeps the descriptor path proven.
const gvisorFD = "gvisor-fd"

// transportRows are the row each backend with a choice of agent
// transport adds after its own, over the transport it does not default
// to.
var transportRows = map[string]string{"native": nativeStream, "gvisor": gvisorFD}

// sessionRows are the backends session tests run on: each of backends,
// and after native and gvisor their other transport's rows
// (transportRows). A test
// that cannot hold on a row skips it with a reason from a table of its
// own (oomNotSame), so the rows stay one list.
func sessionRows(backends []string) []string {
	var rows []string
	for _, b := range backends {
		rows = append(rows, b)
		if s, ok := transportRows[b]; ok {
			rows = append(rows, s)
		}
	}
	return rows
}

// backendArgs are the flags that pick row b.
func backendArgs(b string) []string {
	switch b {
	case nativeStream:
		return []string{"--backend", "native", "--agent-transport", "stream"}
	case gvisorFD:
		return []string{"--backend", "gvisor", "--agent-transport", "fd"}
	}
	return []string{"--backend", b}
}

// requireBackend skips (fails in CI) when the host lacks b's runtime.
func requireBackend(t *testing.T, b string) {
	t.Helper()
	switch b {
	case "gvisor", gvisorFD:
		if _, err := gvisor.FindRunsc(""); err != nil {
			testhost.SkipOrFail(t, "no runsc: "+err.Error())
		}
	case "docker":
		if err := exec.Command("docker", "version").Run(); err != nil {
			testhost.SkipOrFail(t, "no Docker engine answers (apt-get install docker.io; dockerd --iptables=false --bridge=none)")
		}
	case "microvm":
		testhost.RequireTool(t, "qemu-system-x86_64")
		if _, _, err := microvm.GuestKernel(microvm.HostAccel().Accel); err != nil {
			testhost.SkipOrFail(t, "no microVM guest kernel: "+err.Error())
		}
	}
}

// conformanceCase is one behaviour every backend must show the same way.
type conformanceCase struct {
	name  string
	flags []string
	// script runs under sh -c.
	script string
	check  func(t *testing.T, r spec.Result)
	// needs is a program the script runs that an image may lack: the
	// template rows skip the case where it does.
	needs string
	// hostOnly says why the case holds on the host's root only.
	hostOnly string
}

func wantExit(code int, stdout string) func(*testing.T, spec.Result) {
	return func(t *testing.T, r spec.Result) {
		t.Helper()
		if r.ExitCode != code || r.Error != "" || (stdout != "" && strings.TrimSpace(r.Stdout) != stdout) {
			t.Errorf("exit %d, stdout %q, stderr %q, error %q; want exit %d, stdout %q", r.ExitCode, r.Stdout, r.Stderr, r.Error, code, stdout)
		}
	}
}

var conformanceCases = []conformanceCase{
	{name: "output and exit code", script: "echo out; echo err >&2; exit 3", check: func(t *testing.T, r spec.Result) {
		if r.ExitCode != 3 || r.Stdout != "out\n" || r.Stderr != "err\n" {
			t.Errorf("got exit %d, %q, %q; want 3, \"out\\n\", \"err\\n\"", r.ExitCode, r.Stdout, r.Stderr)
		}
	}},
	{name: "unprivileged user owning the workspace", script: "python3 -c 'import os; st = os.stat(\"/workspace\"); print(os.getuid() == st.st_uid == os.getgid() == st.st_gid != 0, os.getgroups() in ([], [os.getgid()]))'", check: wantExit(0, "True True")},
	{name: "no capabilities", script: "grep CapEff /proc/self/status | tr -d '\\t'", check: wantExit(0, "CapEff:0000000000000000")},
	{name: "seccomp filter on", script: "grep Seccomp: /proc/self/status | tr -d '\\t'", check: wantExit(0, "Seccomp:2")},
	{name: "hostname", script: "hostname", check: wantExit(0, "sandbox")},
	{name: "environment", script: "echo $HOME $USER $PWD ${HTTP_PROXY:-none}", check: wantExit(0, "/home/sandbox sandbox /workspace none")},
	{name: "read-only root", script: "for p in /usr/x /etc/x /x; do touch $p 2>/dev/null && echo wrote $p; done; echo done", check: wantExit(0, "done")},
	{name: "writable workspace and tmp", script: "echo a > /workspace/f && echo b > /tmp/f && cat /workspace/f /tmp/f | tr -d '\\n'", check: wantExit(0, "ab")},
	{name: "host secrets hidden", script: "test -e /etc/shadow && echo shadow; test -e /root/.ssh && echo ssh; echo done", check: wantExit(0, "done"), hostOnly: "an image's /etc/shadow is the image's own (templateCases checks it is unreadable)"},
	{name: "sysrq not writable", script: "(echo > /proc/sysrq-trigger) 2>/dev/null && echo opened; echo done", check: wantExit(0, "done")},
	{name: "only loopback", script: "python3 -c 'import socket; print(sorted(n for _, n in socket.if_nameindex()))'", check: wantExit(0, "['lo']")},
	{name: "no route out", script: "python3 -c '\nimport socket\ntry:\n socket.create_connection((\"192.0.2.1\", 80), timeout=3)\n print(\"connected\")\nexcept OSError as e:\n print(\"refused\")'", check: wantExit(0, "refused")},
	{name: "not found", script: "exec no-such-program", check: func(t *testing.T, r spec.Result) {
		if r.ExitCode != 127 {
			t.Errorf("exit %d, want 127", r.ExitCode)
		}
	}},
	{name: "timeout kills the tree", flags: []string{"--timeout", "1s"}, script: "sleep 60 & setsid sleep 60 & sleep 60", check: func(t *testing.T, r spec.Result) {
		if !r.TimedOut || r.ExitCode != 137 {
			t.Errorf("timed_out %v, exit %d; want true, 137", r.TimedOut, r.ExitCode)
		}
	}},
	{name: "pids limit", flags: []string{"--pids", "20"}, script: "python3 -c '\nimport os, time\nn = 0\ntry:\n for i in range(100):\n  if os.fork() == 0:\n   time.sleep(2); os._exit(0)\n  n += 1\nexcept OSError:\n print(\"limited\")\nelse:\n print(\"forked\", n)'", check: wantExit(0, "limited")},
	{name: "disk limit", flags: []string{"--disk", "8MiB"}, script: "dd if=/dev/zero of=/workspace/f bs=1M count=20 2>/dev/null || echo full", check: wantExit(0, "full")},
	{name: "output limit", flags: []string{"--output-limit", "1KiB"}, script: "head -c 100000 /dev/zero | tr '\\0' a", check: func(t *testing.T, r spec.Result) {
		if !r.StdoutTruncated || len(r.Stdout) != 1024 {
			t.Errorf("truncated %v, %d bytes; want true, 1024", r.StdoutTruncated, len(r.Stdout))
		}
	}},
	{name: "proxy refuses what the rules do not allow", flags: []string{"--net", "proxy", "--allow", "example.org"}, script: "curl -s -o /dev/null -w '%{http_code}' -m 10 http://169.254.169.254/; echo; curl -s -o /dev/null -w '%{http_code}' -m 10 http://api.github.com/", check: wantExit(0, "403\n403"), needs: "curl"},
}

// TestConformance runs every case on every backend: the same request
// must behave the same whatever isolates it (README lists where the
// technology forces a difference, and those cases are not here).
func TestConformance(t *testing.T) {
	for _, b := range conformanceBackends(t) {
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			for _, c := range conformanceCases {
				t.Run(c.name, func(t *testing.T) {
					r := sh(t, c.script, append([]string{"--backend", b}, c.flags...)...)
					c.check(t, r)
				})
			}
		})
	}
}

// templateCases hold on a template's root, besides conformanceCases.
var templateCases = []conformanceCase{
	{name: "the image's own secrets unreadable", script: "test -r /etc/shadow && echo readable; test -r /root && echo root; echo done", check: wantExit(0, "done")},
	{name: "the image's programs", script: "test -e /usr/bin/runsc -o -e /usr/sbin/dockerd && echo host; echo image", check: wantExit(0, "image")},
	{name: "var tmp is the scratch tmp", script: "echo v > /var/tmp/v && cat /tmp/v", check: wantExit(0, "v")},
	{name: "the image's environment", script: "echo $PATH", check: wantExit(0, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")},
	{name: "proxy refuses what the rules do not allow, from the image's python", flags: []string{"--net", "proxy", "--allow", "example.org"}, script: proxyRefusalPython, check: wantExit(0, "403\n403")},
}

// proxyRefusalPython is the proxy case without curl, which an image may
// lack: urllib goes through the proxy the environment names.
const proxyRefusalPython = `python3 -c '
import urllib.request, urllib.error
for url in ("http://169.254.169.254/", "http://api.github.com/"):
    try:
        urllib.request.urlopen(url, timeout=10)
        print("reached")
    except urllib.error.HTTPError as e:
        print(e.code)
'`

// TestConformanceTemplate runs the conformance cases on a template (the
// minimal test image) on every backend: a box on an image's root must
// behave as one on the host's, whatever isolates it.
func TestConformanceTemplate(t *testing.T) {
	backends := conformanceBackends(t)
	state := minimalTemplate(t)
	root := filepath.Join(state, "templates/templates/minimal/rootfs")
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			for _, c := range append(conformanceCases, templateCases...) {
				t.Run(c.name, func(t *testing.T) {
					if c.hostOnly != "" {
						t.Skip(c.hostOnly)
					}
					if _, err := os.Lstat(filepath.Join(root, "usr/bin", c.needs)); c.needs != "" && err != nil {
						t.Skipf("the minimal image has no %s", c.needs)
					}
					flags := append([]string{"--backend", b, "--state-dir", state, "--template", "minimal"}, c.flags...)
					c.check(t, sh(t, c.script, flags...))
				})
			}
		})
	}
}

// TestConformanceStdin checks stdin reaches a one-shot run.
func TestConformanceStdin(t *testing.T) {
	for _, b := range conformanceBackends(t) {
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			inv := warden(t, "hello\n", "run", "--backend", b, "--", "cat")
			if inv.code != 0 || inv.stdout != "hello\n" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 0, \"hello\\n\"", inv.code, inv.stdout, inv.stderr)
			}
		})
	}
}

// sleepsLeft is Python code whose value is the number of sleep processes
// left in the box, zombies included, so that an orphan the agent failed
// to kill or to reap counts. A killed process ends when it next runs and
// stays a zombie until the agent reaps it (on a box confined to one CPU,
// possibly after this code's first look), so it looks up to 100 times,
// 0.1 s apart.
const sleepsLeft = `import glob, time
def left():
    n = 0
    for p in glob.glob('/proc/[0-9]*/stat'):
        try:
            st = open(p).read()
        except OSError:
            continue
        n += st[st.index('(') + 1:st.rindex(')')] == 'sleep'
    return n
for _ in range(100):
    if left() == 0:
        break
    time.sleep(0.1)
left()`

// orphanMakers are commands that leave sleeps behind when their exec
// times out: one in its own session, and one a level further down, whose
// parent is still alive when the agent first sweeps the orphans.
var orphanMakers = []string{
	"setsid sleep 30 & sleep 30",
	`setsid sh -c "setsid sleep 30 & wait" & sleep 30`,
}

// TestConformanceSession checks a session's state, charts and files on
// every backend, through the HTTP API.
func TestConformanceSession(t *testing.T) {
	for _, b := range sessionRows(conformanceBackends(t)) {
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			s := startServer(t, backendArgs(b)...)
			id := s.newSession(t, keyA, nil)
			s.code(t, keyA, id, "python", "x = 21", nil)
			if r := s.code(t, keyA, id, "python", "x * 2", nil); r.Value != "42" {
				t.Errorf("x * 2 = %q (stderr %q), want 42", r.Value, r.Stderr)
			}
			code, _ := s.call(t, keyA, http.MethodPut, "/v1/sessions/"+id+"/files?path=in.txt", strings.NewReader("uploaded"), "application/octet-stream")
			if code != http.StatusOK && code != http.StatusCreated {
				t.Fatalf("upload = %d", code)
			}
			if r := s.code(t, keyA, id, "python", "open('/workspace/in.txt').read() + '!'", nil); r.Value != "'uploaded!'" {
				t.Errorf("reading the upload = %q (stderr %q)", r.Value, r.Stderr)
			}
			s.code(t, keyA, id, "python", "open('/workspace/out.txt', 'w').write('made')", nil)
			if code, body := s.call(t, keyA, http.MethodGet, "/v1/sessions/"+id+"/files?path=out.txt", nil, ""); code != http.StatusOK || string(body) != "made" {
				t.Errorf("download = %d %q, want 200 \"made\"", code, body)
			}
			r := s.code(t, keyA, id, "python", "import time; time.sleep(30)", map[string]any{"timeout_seconds": 1})
			if !r.TimedOut {
				t.Errorf("sleep past the timeout: timed_out false")
			}
			if r := s.code(t, keyA, id, "python", "x", nil); r.Value != "21" && r.Value != "" {
				t.Errorf("after a timeout x = %q", r.Value)
			}
			for _, cmd := range orphanMakers {
				var r2 spec.Result
				s.jsonCall(t, keyA, http.MethodPost, "/v1/sessions/"+id+"/exec", map[string]any{"command": []string{"sh", "-c", cmd}, "timeout_seconds": 1}, http.StatusOK, &r2)
				if r := s.code(t, keyA, id, "python", sleepsLeft, nil); r.Value != "0" {
					t.Errorf("%q: sleeps left after the exec timed out: %q (stderr %q); want 0", cmd, r.Value, r.Stderr)
				}
			}
			if code, _ := s.call(t, keyA, http.MethodDelete, "/v1/sessions/"+id, nil, ""); code != http.StatusNoContent {
				t.Errorf("delete = %d, want 204", code)
			}
		})
	}
}
