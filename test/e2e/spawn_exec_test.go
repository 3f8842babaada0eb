package e2e

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// spawnedRunCases are one-shot runs whose Result must not depend on who
// forked warden-exec: warden run itself, or a server's spawner.
var spawnedRunCases = []struct {
	name    string
	command []string
	stdin   string
	timeout int
}{
	{name: "exit 3 with output", command: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}},
	{name: "killed by signal 9", command: []string{"sh", "-c", "kill -9 $$"}},
	{name: "timeout", command: []string{"sleep", "60"}, timeout: 1},
	{name: "not executable", command: []string{"/etc/passwd"}},
	{name: "missing program", command: []string{"no-such-program-x20"}},
	{name: "stdin passthrough", command: []string{"cat"}, stdin: "line one\nline two\n"},
	{name: "PID 1 is warden-exec", command: []string{"cat", "/proc/1/cmdline"}},
}

// TestServerRunUsesWardenExec: POST /v1/run on a server without a pool
// builds the sandbox with warden-exec, forked by the server's spawner
// (PID 1 inside is warden-exec), and each Result is the one
// `warden run --executor fast` gives for the same command: exit code,
// signal, timeout, output and the executor's own error text.
func TestServerRunUsesWardenExec(t *testing.T) {
	if p := executors(t); p.sides[1].name != "fast" {
		t.Skip(p.note)
	}
	srv := startServer(t)
	for _, c := range spawnedRunCases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			direct := directFastRun(t, c.command, c.stdin, c.timeout)
			body := map[string]any{"command": c.command}
			if c.stdin != "" {
				body["stdin"] = c.stdin
			}
			if c.timeout > 0 {
				body["limits"] = map[string]any{"timeout_seconds": c.timeout}
			}
			var served spec.Result
			srv.jsonCall(t, keyA, "POST", "/v1/run", body, http.StatusOK, &served)
			for _, f := range []struct{ name, direct, served string }{
				{"exit_code", strconv.Itoa(direct.ExitCode), strconv.Itoa(served.ExitCode)},
				{"signal", direct.Signal, served.Signal},
				{"timed_out", strconv.FormatBool(direct.TimedOut), strconv.FormatBool(served.TimedOut)},
				{"stdout", direct.Stdout, served.Stdout},
				{"stderr", direct.Stderr, served.Stderr},
				{"error", direct.Error, served.Error},
			} {
				if f.direct != f.served {
					t.Errorf("%s: warden run --executor fast got %q, POST /v1/run got %q", f.name, f.direct, f.served)
				}
			}
			if c.name == "PID 1 is warden-exec" && served.Stdout != "warden-exec\x00" {
				t.Errorf("POST /v1/run: /proc/1/cmdline is %q, want %q (the server did not use warden-exec)", served.Stdout, "warden-exec\x00")
			}
		})
	}
}

// directFastRun is `warden run --json --executor fast` of command, its
// Result read whatever the exit code.
func directFastRun(t *testing.T, command []string, stdin string, timeout int) spec.Result {
	t.Helper()
	args := []string{"run", "--json", "--executor", "fast"}
	if timeout > 0 {
		args = append(args, "--timeout", strconv.Itoa(timeout)+"s")
	}
	inv := warden(t, stdin, append(append(args, "--"), command...)...)
	var r spec.Result
	if err := json.Unmarshal([]byte(inv.stdout), &r); err != nil {
		t.Fatalf("warden %q: exit %d, stdout %q, stderr %q: not a Result: %v", args, inv.code, inv.stdout, inv.stderr, err)
	}
	return r
}

// proxyRunBody is a one-shot run warden-exec will not build (the egress
// bridge needs the Go init), which prints its PID 1's argv.
var proxyRunBody = map[string]any{
	"command": []string{"cat", "/proc/1/cmdline"},
	"network": map[string]any{"mode": "proxy", "allow": []string{"allowed.test:80"}},
}

// TestServerRunProxyFallsBack: under auto, a server's one-shot run with
// --net proxy, which warden-exec cannot build, is built by the Go init
// through the same spawner (PID 1 is warden-init), not refused.
func TestServerRunProxyFallsBack(t *testing.T) {
	if p := executors(t); p.sides[1].name != "fast" {
		t.Skip(p.note)
	}
	srv := startServer(t)
	var r spec.Result
	srv.jsonCall(t, keyA, "POST", "/v1/run", proxyRunBody, http.StatusOK, &r)
	if r.ExitCode != 0 || r.Stdout != "warden-init\x00" {
		t.Errorf("POST /v1/run with network proxy: exit %d, /proc/1/cmdline %q (stderr %q), want 0 and %q", r.ExitCode, r.Stdout, r.Stderr, "warden-init\x00")
	}
}

// TestServerFastRefusesProxy: `warden serve --executor fast` answers a
// --net proxy run with 501 unsupported naming the feature, never with a
// flag's advice or a host path (the operator's line goes to its log).
func TestServerFastRefusesProxy(t *testing.T) {
	if p := executors(t); p.sides[1].name != "fast" {
		t.Skip(p.note)
	}
	srv := startServer(t, "--executor", "fast")
	code, b := srv.call(t, keyA, "POST", "/v1/run", jsonBody(t, proxyRunBody), "application/json")
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("POST /v1/run = %d %s: not an error body: %v", code, b, err)
	}
	if code != http.StatusNotImplemented || e.Error.Code != "unsupported" || !strings.Contains(e.Error.Message, "--net proxy") {
		t.Errorf("POST /v1/run with network proxy on --executor fast = %d %s, want 501 unsupported naming --net proxy", code, b)
	}
	for _, leak := range []string{"--executor", "/"} {
		if strings.Contains(e.Error.Message, leak) {
			t.Errorf("the answer %q names %q", e.Error.Message, leak)
		}
	}
}
