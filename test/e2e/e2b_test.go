package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// e2bDir holds the pinned npm packages (package-lock.json, installed by
// `make test` with npm ci) and the scripts that drive them.
const e2bDir = "e2b"

// e2bPins are the packages the scripts import, at the versions the lock
// file pins: a stale node_modules fails the test rather than testing
// another SDK.
var e2bPins = map[string]string{
	"e2b":                   "2.51.0",
	"e2b-250":               "2.50.0",
	"@e2b/code-interpreter": "2.8.0",
}

// scriptTimeout bounds one node script, far above what any needs.
const scriptTimeout = 4 * time.Minute

// requireE2BPackages skips (or fails in CI) unless node and the pinned
// packages are installed, and returns node's path.
func requireE2BPackages(t testing.TB) string {
	t.Helper()
	node := testhost.RequireTool(t, "node")
	for name, version := range e2bPins {
		b, err := os.ReadFile(filepath.Join(e2bDir, "node_modules", name, "package.json"))
		if err != nil {
			testhost.SkipOrFail(t, fmt.Sprintf("the E2B SDKs are not installed (%v): run `make e2b-deps` or `cd test/e2e/e2b && npm ci`", err))
			return ""
		}
		var pkg struct{ Version string }
		if err := json.Unmarshal(b, &pkg); err != nil || pkg.Version != version {
			t.Fatalf("%s in test/e2e/e2b/node_modules is version %q (%v), want %s: run `make e2b-deps`", name, pkg.Version, err, version)
		}
	}
	return node
}

// e2bScript runs scripts/NAME.mjs against srv as keyA, with extra
// environment, and decodes the one JSON line of checks it prints.
func e2bScript(t *testing.T, node string, srv *apiServer, name string, extra ...string) map[string]any {
	t.Helper()
	out, stderr, err := runNode(t, node, srv, "scripts/"+name+".mjs", extra...)
	if err != nil {
		t.Fatalf("node %s.mjs: %v\nstdout: %s\nstderr: %s", name, err, out, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var checks map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &checks); err != nil {
		t.Fatalf("node %s.mjs printed %q, not one JSON line of checks: %v\nstderr: %s", name, out, err, stderr)
	}
	if v, ok := checks["timedOut"]; ok {
		t.Errorf("%s.mjs: %v", name, v)
	}
	return checks
}

// runNode runs one script in e2bDir with the E2B SDK's variables pointing
// at srv, bounded by scriptTimeout.
func runNode(t *testing.T, node string, srv *apiServer, script string, extra ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = e2bDir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"E2B_API_URL=" + srv.url, "E2B_SANDBOX_URL=" + srv.url, "E2B_API_KEY=" + keyA,
	}, extra...)
	cmd.WaitDelay = 10 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("did not finish within %s: %w", scriptTimeout, err)
	}
	return out.String(), errb.String(), err
}

// logServerErrors logs, once t has failed, the first errors srv logged,
// which name what an SDK's "see the server's log" refers to. It stops srv.
func logServerErrors(t *testing.T, srv *apiServer) {
	t.Helper()
	if !t.Failed() {
		return
	}
	srv.stop()
	logs, _ := srv.exit()
	shown := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "level=ERROR") && shown < 20 {
			t.Logf("server: %s", line)
			shown++
		}
	}
}

// want is what one check of a script must be: one of the values, or,
// with contains, a value that holds it.
type want struct {
	check    string
	any      []string
	contains bool
}

// is wants the check to equal one of values.
func is(check string, values ...string) want { return want{check: check, any: values} }

// has wants the check to contain sub.
func has(check, sub string) want { return want{check: check, any: []string{sub}, contains: true} }

// compareChecks reports every check of script that is not as wanted.
func compareChecks(t *testing.T, script string, got map[string]any, wants []want) {
	t.Helper()
	for _, w := range wants {
		v, ok := got[w.check]
		if !ok {
			t.Errorf("%s: check %q missing from the script's output", script, w.check)
			continue
		}
		s := fmt.Sprint(v)
		if !matches(s, w) {
			t.Errorf("%s: %s = %q, want %s", script, w.check, s, w.describe())
		}
	}
}

func matches(s string, w want) bool {
	for _, a := range w.any {
		if s == a || (w.contains && strings.Contains(s, a)) {
			return true
		}
	}
	return false
}

func (w want) describe() string {
	if w.contains {
		return fmt.Sprintf("one holding %q", w.any[0])
	}
	return fmt.Sprintf("%q", w.any)
}

// e2bServer starts `warden serve` for the E2B tests: two keys (keyA and
// keyB, startServer's), and no start pacing, since each script creates
// several sandboxes at once.
func e2bServer(t *testing.T, flags ...string) *apiServer {
	t.Helper()
	return startServer(t, append([]string{"--start-rate", "0"}, flags...)...)
}

// TestE2BSDK runs the real, pinned E2B SDKs (e2b@2.51.0,
// @e2b/code-interpreter@2.8.0 and e2b@2.50.0) against `warden serve`,
// unchanged, through E2B_API_URL and E2B_SANDBOX_URL, as a user would.
// One server serves every script; each script creates its own sandboxes.
func TestE2BSDK(t *testing.T) {
	node := requireE2BPackages(t)
	srv := e2bServer(t)
	secret := fmt.Sprintf("host-secret-%d", time.Now().UnixNano())
	secretPath := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secretPath, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		script string
		env    []string
		wants  []want
	}{
		{"lifecycle", nil, lifecycleWants},
		{"commands", nil, commandWants},
		{"files", []string{"E2B_HOST_SECRET_PATH=" + secretPath, "E2B_HOST_SECRET=" + secret}, fileWants},
		{"interp", nil, interpWants},
		{"tenancy", []string{"E2B_OTHER_API_KEY=" + keyB}, tenancyWants},
		{"older", nil, olderWants},
		{"pause", nil, pauseWants},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			compareChecks(t, tt.script, e2bScript(t, node, srv, tt.script, tt.env...), tt.wants)
		})
	}
	if b, err := os.ReadFile(secretPath); err != nil || string(b) != secret {
		t.Errorf("the host file a sandbox linked to = %q (%v), want it untouched: %q", b, err, secret)
	}
	srv.healthy(t)
	logServerErrors(t, srv)
}

var lifecycleWants = []want{
	is("created", "true"),
	is("info.sandboxId", "true"),
	is("info.templateId", "base"),
	is("info.metadata", "true"),
	is("info.state", "running"),
	is("instance.getInfo", "true"),
	is("isRunning", "true"),
	is("list.mine", "true"),
	is("list.all.includes", "true"),
	is("setTimeout.extends", "true"),
	is("connect", "connected\n"),
	is("kill", "true"),
	is("isRunning.afterKill", "false"),
	is("getInfo.afterKill", "SandboxNotFoundError"),
	is("staticKill.afterKill", "false"),
	is("getInfo.unknown", "SandboxNotFoundError"),
}

var commandWants = []want{
	is("echo", "hello\n"),
	is("stderr", "oops\n"),
	is("exit0", "0"),
	is("exit3", `CommandExitError 3 "before\n"`),
	is("envs", "hi there\n"),
	// /home/user is E2B's home; Warden's box may work in /workspace,
	// which the API shows as /home/user (docs: "Use the E2B SDKs").
	is("cwd", "/home/user\n", "/workspace\n"),
	is("defaultCwd", "/home/user\n", "/workspace\n"),
	is("background.stream", "line1,line2,line3 exit=0 pid>0=true"),
	is("onStderr", "warn\n"),
	is("stdin", "from stdin\n"),
	is("kill", "listed=true killed=true wait=CommandExitError"),
	is("kill.unknown", "false"),
	is("timeout", "TimeoutError"),
	is("outlivesStream", "late"),
	is("connect.unknown", "NotFoundError"),
}

var fileWants = []want{
	is("write", "/home/user/a.txt"),
	is("read", "alpha\n"),
	is("readRelative", "alpha\n"),
	is("readBytes", "6"),
	is("seenByCommand", "alpha\n"),
	is("writeFromCommand", "beta"),
	is("writeFiles", "one.txt,two.txt"),
	is("makeDir", "true"),
	is("makeDir.again", "false"),
	is("list", "a=file:6:/home/user/a.txt dir=dir"),
	is("exists", "true false"),
	is("getInfo", "a.txt file 6"),
	is("rename", "/home/user/c.txt false alpha\n"),
	is("remove", "false"),
	is("read.missing", "FileNotFoundError"),
	is("rename.missing", "FileNotFoundError"),
	is("binary", "true"),
	is("link.plant", "0"),
	is("link.read.leaks", "false"),
	is("link.readThroughDir.leaks", "false"),
	is("link.list", "true"),
}

var interpWants = []want{
	is("oneplusone", "2"),
	is("state", "42"),
	is("stdout", "hi\n"),
	is("stderr", "err\n"),
	has("exception", "ZeroDivisionError|division by zero|true"),
	is("chart", "png"),
	is("streaming", "err:b,out:a results=42 errors=ValueError"),
	// E2B's interpreter drops the single quotes of a str's repr in text.
	is("context", "own=in context other=NameError listed=true restart=NameError removed=true"),
	has("javascript", "2-4-6"),
	is("bash", "from-bash"),
}

var tenancyWants = []want{
	is("other.list.sees", "mine=false theirs=true"),
	has("other.getInfo", "NotFound"),
	has("other.connect", "NotFound"),
	has("other.setTimeout", "NotFound"),
	is("other.kill", "false"),
	is("data.noToken.files", "401"),
	is("data.otherToken.files", "401"),
	is("data.otherToken.listDir", "401"),
	is("data.otherToken.start", "401"),
	is("tokensDiffer", "true"),
	is("mine.stillWorks", "alive\n"),
	is("theirs.works", "theirs\n"),
}

var pauseWants = []want{
	is("pause", "true"),
	is("pause.again", "false"),
	is("info.state.paused", "paused"),
	is("list.paused", "true paused"),
	is("list.default", "paused"),
	is("list.running.excludes", "0"),
	is("connect.resumes", "42"),
	is("info.state.running", "running"),
	is("kill", "true"),
}

var olderWants = []want{
	is("created", "true"),
	is("echo", "old sdk\n"),
	is("file", "from 2.50"),
	is("kill", "true"),
	is("getInfo.afterKill", "SandboxNotFoundError"),
}

// TestE2BSDKTemplate: with e2b@2.51.0, a sandbox created on a template of
// the server's store by its id runs the image; an id the store lacks is
// refused as E2B refuses a missing template.
func TestE2BSDKTemplate(t *testing.T) {
	node := requireE2BPackages(t)
	state := minimalTemplate(t)
	srv := e2bServer(t, "--state-dir", state)
	compareChecks(t, "templates", e2bScript(t, node, srv, "templates", "E2B_TEMPLATE=minimal"), []want{
		is("created", "true"),
		is("templateId", "minimal"),
		is("image", "image\n"),
		is("kill", "true"),
		has("create.unknown.message", `template "no-such-template" not found`),
	})
	srv.healthy(t)
	logServerErrors(t, srv)
}
