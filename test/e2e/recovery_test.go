package e2e

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// sessionState is the part of a Session the recovery tests read.
type sessionState struct {
	State  string `json:"state"`
	Reason string `json:"reason"`
}

// requirePersistentWorkspaces skips (fails in CI) where sessions cannot
// keep their workspace outside the sandbox.
func requirePersistentWorkspaces(t *testing.T) {
	t.Helper()
	requireSandbox(t)
	if !native.IdmapsTmpfs() {
		testhost.SkipOrFail(t, "persistent workspaces need Linux 6.3 or later (idmapped tmpfs)")
	}
}

// TestCrashRecovery kills the server with SIGKILL while a session holds an
// uploaded file, a file its code wrote and a running interpreter. After a
// restart on the same state directory nothing of the old sandbox may run,
// its cgroups must be gone, and the session must answer as dead with both
// files readable, read-only, across a further graceful restart, until it
// is deleted.
func TestCrashRecovery(t *testing.T) {
	requirePersistentWorkspaces(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	mark := sandboxMark()
	name, value, _ := strings.Cut(mark, "=")
	s1 := startServer(t, "--state-dir", stateDir)
	id := s1.newSession(t, keyA, map[string]any{"env": map[string]string{name: value}})
	uploaded := rand.Text()
	if code, b := s1.call(t, keyA, "PUT", sessionPath(id, "/files?path=up/uploaded.txt"), strings.NewReader(uploaded), "application/octet-stream"); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("upload = %d %s", code, b)
	}
	if r := s1.code(t, keyA, id, "python", "open('/workspace/made.txt', 'w').write('made inside')\nx = 1", nil); r.ExitCode != 0 {
		t.Fatalf("writing a file from code: %+v", r)
	}
	if len(poolProcs(mark)) == 0 || len(cgroupDirsOf(t, s1.pid)) == 0 {
		t.Fatal("the session's interpreter or cgroups are not there before the crash")
	}

	if err := syscall.Kill(s1.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = s1.exit()
	var left []int
	if !waitFor(10*time.Second, func() bool { left = poolProcs(mark); return len(left) == 0 }) {
		t.Errorf("10 s after the server was SIGKILLed, %d sandbox processes remain:%s", len(left), describeProcs(left))
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}

	// A process on its way out has no environ left for poolProcs to match,
	// yet is still in its cgroup, which the sweep then rightly keeps: wait
	// for the crashed server's cgroups to hold no process too.
	if !waitFor(10*time.Second, func() bool { return cgroupsEmpty(cgroupDirsOf(t, s1.pid)) }) {
		t.Errorf("10 s after the server was SIGKILLed, its cgroups still hold processes")
	}
	s2 := startServer(t, "--state-dir", stateDir)
	if dirs := cgroupDirsOf(t, s1.pid); len(dirs) > 0 {
		t.Errorf("the restarted server left the crashed one's cgroups: %q", dirs)
	}
	var got sessionState
	s2.jsonCall(t, keyA, "GET", sessionPath(id), nil, http.StatusOK, &got)
	if got.State != "dead" || !strings.Contains(got.Reason, "pid "+strconv.Itoa(s1.pid)) {
		t.Errorf("recovered session = %+v, want dead, the reason naming pid %d", got, s1.pid)
	}
	if code, _ := s2.call(t, keyB, "GET", sessionPath(id), nil, ""); code != http.StatusNotFound {
		t.Errorf("another key's GET of the recovered session = %d, want 404", code)
	}
	for path, want := range map[string]string{"up/uploaded.txt": uploaded, "made.txt": "made inside"} {
		code, b := s2.call(t, keyA, "GET", sessionPath(id, "/files?path="+path), nil, "")
		if code != http.StatusOK || string(b) != want {
			t.Errorf("GET %s after the crash = %d %q, want 200 %q", path, code, b, want)
		}
	}
	if code, b := s2.call(t, keyA, "POST", sessionPath(id, "/exec"), strings.NewReader(`{"command":["true"]}`), "application/json"); code != http.StatusConflict {
		t.Errorf("exec in a dead session = %d %s, want 409", code, b)
	}
	if code, b := s2.call(t, keyA, "PUT", sessionPath(id, "/files?path=new.txt"), strings.NewReader("x"), "application/octet-stream"); code != http.StatusConflict {
		t.Errorf("upload to a dead session = %d %s, want 409", code, b)
	}
	if !mountsUnder(t, stateDir) {
		t.Error("the dead session's workspace is not mounted under the state directory")
	}

	// A graceful restart keeps the dead session for its owner.
	s2.stop()
	if logs, err := s2.exit(); err != nil {
		t.Errorf("SIGTERM of a server holding only a dead session: %v\n%s", err, logs)
	}
	s3 := startServer(t, "--state-dir", stateDir)
	if code, b := s3.call(t, keyA, "GET", sessionPath(id, "/files?path=made.txt"), nil, ""); code != http.StatusOK || string(b) != "made inside" {
		t.Errorf("after a graceful restart GET made.txt = %d %q, want the file", code, b)
	}
	if code, b := s3.call(t, keyA, "DELETE", sessionPath(id), nil, ""); code != http.StatusNoContent {
		t.Fatalf("DELETE of the dead session = %d %s", code, b)
	}
	if mountsUnder(t, stateDir) {
		t.Error("a workspace is still mounted under the state directory after the session was deleted")
	}
	if entries, _ := os.ReadDir(filepath.Join(stateDir, "sessions")); len(entries) != 0 {
		t.Errorf("session records left after the delete: %v", entries)
	}
}

// mountsUnder says whether anything is mounted below dir.
func mountsUnder(t *testing.T, dir string) bool {
	for _, l := range mountLines(t) {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			return true
		}
	}
	return false
}

// TestStateDirFull fills the state directory's file system under a running
// server: a new session is refused with 507 and a message that says so,
// the existing session keeps working, and creating works again once there
// is room.
func TestStateDirFull(t *testing.T) {
	requireSandbox(t)
	fs := testhost.Tmpfs(t, "256k")
	srv := startServer(t, "--state-dir", filepath.Join(fs, "state"))
	id := srv.newSession(t, keyA, nil)
	filler := filepath.Join(fs, "filler")
	testhost.Fill(t, filler)
	code, b := srv.call(t, keyA, "POST", "/v1/sessions", strings.NewReader("{}"), "application/json")
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	if code != http.StatusInsufficientStorage || e.Error.Code != "insufficient_storage" || !strings.Contains(e.Error.Message, "is full") {
		t.Errorf("create on a full state directory = %d %s, want 507 insufficient_storage saying it is full", code, b)
	}
	var r struct {
		ExitCode int `json:"exit_code"`
	}
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), map[string]any{"command": []string{"true"}}, http.StatusOK, &r)
	srv.healthy(t)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	srv.newSession(t, keyA, nil)
}

// TestStateDirReadOnly starts a server on a read-only state directory: it
// must refuse to start with one line that says why, not crash.
func TestStateDirReadOnly(t *testing.T) {
	requireSandbox(t)
	fs := testhost.Tmpfs(t, "64k")
	if err := unix.Mount("", fs, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, wardenBin, "serve", "--listen", "127.0.0.1:0", "--state-dir", filepath.Join(fs, "state")).CombinedOutput()
	msg := strings.TrimSpace(string(out))
	if err == nil || !strings.Contains(msg, "is read-only") || strings.Contains(msg, "\n") || strings.Contains(msg, "goroutine") {
		t.Errorf("serve on a read-only state directory = %v, %q; want a failure with one line saying it is read-only", err, msg)
	}
}

// TestPersistentWorkspaceSharesDisk checks that a session's persistent
// workspace and its /tmp draw on one disk_bytes, as in a sandbox that
// keeps its writable space to itself.
func TestPersistentWorkspaceSharesDisk(t *testing.T) {
	requirePersistentWorkspaces(t)
	srv := startServer(t)
	id := srv.newSession(t, keyA, map[string]any{"limits": map[string]any{"disk_bytes": 8 << 20}})
	var r struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), map[string]any{"command": []string{"sh", "-c",
		"head -c 6000000 /dev/zero > /tmp/a && echo tmp-ok; head -c 6000000 /dev/zero > /workspace/b && echo ws-ok; df -k /workspace | tail -1"}}, http.StatusOK, &r)
	if !strings.Contains(r.Stdout, "tmp-ok") || strings.Contains(r.Stdout, "ws-ok") || !strings.Contains(r.Stderr, "No space left") {
		t.Errorf("6 MB in /tmp then 6 MB in /workspace under an 8 MiB disk: stdout %q stderr %q; want the second refused", r.Stdout, r.Stderr)
	}
}

// TestCrashRecoveryPaused: a server SIGKILLed while a session is paused
// leaves its box frozen, which no parent-death signal ends until a thaw.
// The next server on the same state directory kills and thaws it, removes
// its cgroups, and reports the session dead, saying it was paused, with
// its files kept: never half paused.
func TestCrashRecoveryPaused(t *testing.T) {
	requirePersistentWorkspaces(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	mark := sandboxMark()
	name, value, _ := strings.Cut(mark, "=")
	s1 := startServer(t, "--state-dir", stateDir)
	id := s1.newSession(t, keyA, map[string]any{"env": map[string]string{name: value}})
	if r := s1.code(t, keyA, id, "python", "open('/workspace/made.txt', 'w').write('made inside')\nx = 1", nil); r.ExitCode != 0 {
		t.Fatalf("writing a file from code: %+v", r)
	}
	s1.jsonCall(t, keyA, "POST", sessionPath(id, "/pause"), nil, http.StatusOK, nil)
	if err := syscall.Kill(s1.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = s1.exit()
	// Frozen, they outlive their server (none of this is asserted: a
	// kernel that ended frozen tasks at once would need no sweep).
	t.Logf("%d processes of the paused sandbox outlived its server", len(poolProcs(mark)))

	s2 := startServer(t, "--state-dir", stateDir)
	var left []int
	if !waitFor(10*time.Second, func() bool { left = poolProcs(mark); return len(left) == 0 }) {
		t.Errorf("10 s after the restart, %d processes of the paused sandbox remain:%s", len(left), describeProcs(left))
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if dirs := cgroupDirsOf(t, s1.pid); len(dirs) > 0 {
		t.Errorf("the restarted server left the crashed one's cgroups: %q", dirs)
	}
	var got sessionState
	s2.jsonCall(t, keyA, "GET", sessionPath(id), nil, http.StatusOK, &got)
	if got.State != "dead" || !strings.Contains(got.Reason, "while the session was paused") {
		t.Errorf("recovered session = %+v, want dead, saying it was paused", got)
	}
	if code, b := s2.call(t, keyA, "GET", sessionPath(id, "/files?path=made.txt"), nil, ""); code != http.StatusOK || string(b) != "made inside" {
		t.Errorf("GET made.txt after the crash = %d %q, want the file", code, b)
	}
	if code, b := s2.call(t, keyA, "POST", sessionPath(id, "/resume"), nil, ""); code != http.StatusConflict {
		t.Errorf("resume of the dead session = %d %s, want 409", code, b)
	}
	if code, b := s2.call(t, keyA, "DELETE", sessionPath(id), nil, ""); code != http.StatusNoContent {
		t.Errorf("DELETE of the dead session = %d %s", code, b)
	}
}
