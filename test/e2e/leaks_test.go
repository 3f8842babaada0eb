package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestNoLeaks runs one-shot runs and session cycles, stops the server with
// a session still open, and expects warden doctor --leaks to find nothing.
func TestNoLeaks(t *testing.T) {
	requireSandbox(t)
	for range 5 {
		if r := sh(t, "true"); r.ExitCode != 0 {
			t.Fatalf("one-shot run = %+v", r)
		}
	}
	srv := startServer(t)
	for range 5 {
		id := srv.newSession(t, keyA, nil)
		var r spec.Result
		srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), map[string]any{"language": "python", "code": "1"}, http.StatusOK, &r)
		srv.jsonCall(t, keyA, "DELETE", sessionPath(id), nil, http.StatusNoContent, nil)
	}
	srv.newSession(t, keyA, nil)
	srv.stop()
	inv := warden(t, "", "doctor", "--leaks", "--json")
	var leaks []map[string]string
	if err := json.Unmarshal([]byte(inv.stdout), &leaks); err != nil || inv.code != 0 || len(leaks) != 0 {
		t.Errorf("doctor --leaks = %d %q %q, want nothing left", inv.code, inv.stdout, inv.stderr)
	}
}

// TestLeaksFound plants a cgroup named after a Warden that cannot exist
// and expects warden doctor --leaks to name it and fail.
func TestLeaksFound(t *testing.T) {
	requireSandbox(t)
	parents := cgroup.Parents()
	if len(parents) == 0 {
		t.Fatal("no cgroup parents")
	}
	// Above the largest pid_max Linux allows, so its owner is never alive.
	planted := filepath.Join(parents[0], "4194305-0123456789abcdef")
	if err := os.MkdirAll(planted, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(planted) })
	inv := warden(t, "", "doctor", "--leaks")
	if inv.code != 1 || !strings.Contains(inv.stdout, planted) {
		t.Errorf("doctor --leaks = %d %q, want exit 1 naming %s", inv.code, inv.stdout, planted)
	}
}

// TestTemplateRootNoLeak plants a gVisor and a microvm root of a template
// no store holds (as a test, or a box of another store's template, leaves
// one): warden doctor --leaks notes them but does not fail, as roots are a
// cache that warden template gc collects, not something a Warden left
// behind.
func TestTemplateRootNoLeak(t *testing.T) {
	requireSandbox(t)
	planted := map[string]string{
		"gvisor root":  filepath.Join("/run/warden/gvisor", "img-"+strings.Repeat("e", 64)+"-0badcafe"),
		"microvm root": filepath.Join("/run/warden-microvm", "img-"+strings.Repeat("e", 64)+"-0badcafe"),
	}
	for _, p := range planted {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := os.Remove(p); err != nil {
				t.Errorf("removing the planted root: %v", err)
			}
		})
	}
	inv := warden(t, "", "doctor", "--leaks", "--state-dir", t.TempDir())
	for kind, p := range planted {
		if inv.code != 0 || !strings.Contains(inv.stdout, "note  "+kind+"  "+p) {
			t.Errorf("doctor --leaks = %d %q %q, want exit 0 and a note naming the %s %s", inv.code, inv.stdout, inv.stderr, kind, p)
		}
	}
}

// TestGracefulShutdown: on SIGTERM a running exec finishes, then every
// session ends, and the server exits 0 saying everything was cleaned.
func TestGracefulShutdown(t *testing.T) {
	srv := startServer(t)
	id := srv.newSession(t, keyA, nil)
	srv.newSession(t, keyB, nil)
	done := make(chan int, 1)
	go func() {
		code, _ := srv.call(t, keyA, "POST", sessionPath(id, "/exec"), strings.NewReader(`{"command":["sh","-c","sleep 1; echo finished"]}`), "application/json")
		done <- code
	}()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var s session
		srv.jsonCall(t, keyA, "GET", sessionPath(id), nil, http.StatusOK, &s)
		if s.State == "busy" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.stop()
	if code := <-done; code != http.StatusOK {
		t.Errorf("the exec running at SIGTERM answered %d, want 200: running requests finish", code)
	}
	logs, err := srv.exit()
	if err != nil || !strings.Contains(logs, "every session ended and was cleaned up") {
		t.Errorf("warden serve exited with %v, logs:\n%s\nwant 0 and the all-clean line", err, logs)
	}
	if left := srv.cgroups(t); len(left) > 0 {
		t.Errorf("cgroups left after shutdown: %v", left)
	}
}
