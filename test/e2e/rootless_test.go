package e2e

import (
	"encoding/json"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// Rootless: warden run by an ordinary user (nobody here) maps that user to
// the sandbox user in a user namespace it may create itself. This host
// delegates no cgroup to nobody, so only --memory 0 --cpus 0 runs; the pids
// limit then falls back to RLIMIT_NPROC, which counts per user namespace.

// asNobody is the prefix that runs warden as nobody with no groups.
func asNobody(t *testing.T, groups ...string) []string {
	t.Helper()
	testhost.RequireRoot(t)
	testhost.RequireTool(t, "setpriv")
	p := []string{"setpriv", "--reuid=65534", "--regid=65534"}
	if len(groups) == 0 {
		return append(p, "--clear-groups")
	}
	return append(p, "--groups="+strings.Join(groups, ","))
}

// rootlessFlags are the limits a host without a delegated cgroup can honour.
var rootlessFlags = []string{"--memory", "0", "--cpus", "0"}

// runRootless runs `warden run --json` as prefix and decodes the Result,
// failing the test if warden could not build the sandbox.
func runRootless(t *testing.T, prefix []string, args ...string) spec.Result {
	t.Helper()
	inv := wardenAs(t, prefix, "", append([]string{"run", "--json"}, args...)...)
	// Name the run by its flags; scripts make long messages.
	if i := slices.Index(args, "--"); i >= 0 && i+1 < len(args) {
		args = append(args[:i+1:i+1], args[i+1])
	}
	var r spec.Result
	if err := json.Unmarshal([]byte(inv.stdout), &r); err != nil {
		t.Fatalf("rootless warden run %q: exit %d, stdout %q, stderr %q: not a Result: %v", args, inv.code, inv.stdout, inv.stderr, err)
	}
	if r.Error != "" || inv.code != 0 {
		t.Fatalf("rootless warden run %q: exit %d, error %q, stderr %q", args, inv.code, r.Error, inv.stderr)
	}
	return r
}

// TestRootlessLockedDown: the rootless sandbox is as locked down as the
// root one: sandbox uid, no capabilities, no_new_privs, seccomp, read-only
// /usr, and the init's memory out of reach although it shares the uid.
func TestRootlessLockedDown(t *testing.T) {
	prefix := asNobody(t)
	r := runRootless(t, prefix, append(rootlessFlags, "--", "id", "-u")...)
	if got := strings.TrimSpace(r.Stdout); got != "1000" {
		t.Errorf("id -u: got %q, want 1000", got)
	}
	r = runRootless(t, prefix, append(rootlessFlags, "--", "cat", "/proc/self/status")...)
	checkLockedStatus(t, r.Stdout)

	tests := []struct{ name, script, want string }{
		{"write /usr", "touch /usr/escape 2>&1; echo rc=$?", "touch: cannot touch '/usr/escape': Read-only file system\nrc=1"},
		{"write /etc/passwd", "echo x 2>&1 >>/etc/passwd; echo rc=$?", "sh: 1: cannot create /etc/passwd: Read-only file system\nrc=2"},
		{"read init's environment", "cat /proc/1/environ >/dev/null 2>&1; echo rc=$?", "rc=1"},
		{"read init's root", "ls /proc/1/root/ >/dev/null 2>&1; echo rc=$?", "rc=2"},
		{"unshare a user namespace", "unshare -U true 2>&1; echo rc=$?", "unshare: unshare failed: Operation not permitted\nrc=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runRootless(t, prefix, append(rootlessFlags, "--", "sh", "-c", tt.script)...)
			if got := strings.TrimSpace(r.Stdout); got != tt.want {
				t.Errorf("%s: got %q, want %q", tt.script, got, tt.want)
			}
		})
	}
}

// TestRootlessForkBombBounded: without a pids cgroup, --pids still bounds
// the program through RLIMIT_NPROC. The bomb checks first that the limit
// is in force, starts at most 64 sleepers, and kills them itself.
func TestRootlessForkBombBounded(t *testing.T) {
	prefix := asNobody(t)
	const pids, tries = 16, 64
	script := `
import os, resource, signal, time
soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
if soft == resource.RLIM_INFINITY:
    print("nolimit")
    raise SystemExit(0)
started, failed, kids = 0, 0, []
for _ in range(` + strconv.Itoa(tries) + `):
    try:
        pid = os.fork()
    except OSError:
        failed += 1
        continue
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    started += 1
    kids.append(pid)
for k in kids:
    os.kill(k, signal.SIGKILL)
for k in kids:
    os.waitpid(k, 0)
print("started=%d failed=%d" % (started, failed))
`
	r := runRootless(t, prefix, append(rootlessFlags, "--pids", strconv.Itoa(pids), "--timeout", "30s", "--", "python3", "-c", script)...)
	out := strings.TrimSpace(r.Stdout)
	if out == "nolimit" {
		t.Fatalf("--pids %d set no RLIMIT_NPROC in a rootless sandbox: a fork bomb would be unbounded", pids)
	}
	var started, failed int
	for _, f := range strings.Fields(out) {
		k, v, _ := strings.Cut(f, "=")
		n, _ := strconv.Atoi(v)
		switch k {
		case "started":
			started = n
		case "failed":
			failed = n
		}
	}
	// The init's own tasks get a small head-room on top of --pids.
	const headroom = 8
	if started+failed != tries || started > pids+headroom {
		t.Errorf("forks with --pids %d: %q (stderr %q), want at most %d of %d started", pids, out, r.Stderr, pids+headroom, tries)
	}
}

// TestRootlessHostGroupsNoSecrets: a rootless sandbox keeps the invoking
// user's supplementary groups (the kernel forbids dropping them without
// setgroups), so whatever those groups can read in the bound host
// directories, untrusted code can read too. The host's TLS private keys
// (group ssl-cert) must not be there at all.
func TestRootlessHostGroupsNoSecrets(t *testing.T) {
	g, err := user.LookupGroup("ssl-cert")
	if err != nil {
		testhost.SkipOrFail(t, "the host has no ssl-cert group: "+err.Error())
	}
	keys, err := filepath.Glob("/etc/ssl/private/*")
	if err != nil || len(keys) == 0 {
		testhost.SkipOrFail(t, "the host has no file in /etc/ssl/private to look for")
	}
	prefix := asNobody(t, g.Gid)
	script := `for f in "$@"; do cat "$f" >/dev/null 2>&1 && echo "read $f"; done; test -e /etc/ssl/private && echo "/etc/ssl/private exists"; true`
	args := append(append(rootlessFlags, "--", "sh", "-c", script, "sh"), keys...)
	r := runRootless(t, prefix, args...)
	if got := strings.TrimSpace(r.Stdout); got != "" {
		t.Errorf("as nobody in group ssl-cert, the sandbox reaches the host's TLS keys:\n%s\nwant /etc/ssl/private absent", got)
	}
}

// TestRootlessDefaultLimitsRefused: the default --memory needs a cgroup
// the user does not have; warden must refuse (exit 125) with one line
// saying how to fix it, not run without the limit.
func TestRootlessDefaultLimitsRefused(t *testing.T) {
	prefix := asNobody(t)
	inv := wardenAs(t, prefix, "", "run", "--", "true")
	if inv.code != 125 {
		t.Errorf("rootless warden run with the default --memory: exit %d, want 125 (stdout %q, stderr %q)", inv.code, inv.stdout, inv.stderr)
	}
	msg := strings.TrimRight(inv.stderr, "\n")
	if strings.Contains(msg, "\n") || msg == "" {
		t.Errorf("stderr: got %q, want one line", inv.stderr)
	}
	if !strings.Contains(msg, "warden doctor") && !strings.Contains(msg, "--memory 0") {
		t.Errorf("stderr %q: want a pointer to `warden doctor` or --memory 0", msg)
	}
}

// TestRootlessWorkspace checks that an ordinary user's --workspace works (a
// plain bind, reopened inside the sandbox's own mount namespace) and that
// the files land owned by that user.
func TestRootlessWorkspace(t *testing.T) {
	prefix := asNobody(t)
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	r := runRootless(t, prefix, append(rootlessFlags, "--workspace", dir, "--", "sh", "-c", "echo hi > /workspace/f && stat -c %u /workspace/f")...)
	if r.ExitCode != 0 || r.Stdout != "1000\n" {
		t.Fatalf("exit %d stdout %q stderr %q, want 0 and a file owned by 1000 inside", r.ExitCode, r.Stdout, r.Stderr)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "f"), &st); err != nil || st.Uid != 65534 {
		t.Errorf("host file: %v, uid %d; want it owned by the invoking user 65534", err, st.Uid)
	}
}

// TestRootlessInitSurvivesSignals is the attack of a program that shares
// the init's uid (rootless) and signals PID 1 with every signal there is,
// including those that crash a Go program and glibc's 32 and 33, which Go
// cannot relay: the init must survive and report the program's own exit.
func TestRootlessInitSurvivesSignals(t *testing.T) {
	prefix := asNobody(t)
	script := `for s in $(seq 1 64); do kill -$s 1 || echo "kill $s failed"; done; sleep 0.2; exit 7`
	r := runRootless(t, prefix, append(rootlessFlags, "--", "sh", "-c", script)...)
	if r.ExitCode != 7 || r.Stdout != "" {
		t.Errorf("exit %d stdout %q stderr %q, want the program's own exit 7 with every kill delivered", r.ExitCode, r.Stdout, r.Stderr)
	}
}

// TestRootlessWorkspaceHoldingEtcRefused: a rootless user's /etc templates
// are that user's own files, so a workspace holding them would let one
// sandbox rewrite the /etc of every later one.
func TestRootlessWorkspaceHoldingEtcRefused(t *testing.T) {
	prefix := asNobody(t)
	runRootless(t, prefix, append(rootlessFlags, "--", "true")...)
	args := append(append([]string{"run"}, rootlessFlags...), "--workspace", os.TempDir(), "--", "true")
	inv := wardenAs(t, prefix, "", args...)
	if inv.code != 125 || !strings.Contains(inv.stderr, "where Warden keeps the /etc") {
		t.Errorf("rootless run with --workspace %s: exit %d, stderr %q; want 125 and a refusal naming the /etc templates", os.TempDir(), inv.code, inv.stderr)
	}
}
