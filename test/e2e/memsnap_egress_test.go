package e2e

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/gvisor"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestMemorySnapshotEgress: on gVisor over the stream a session with the
// egress proxy keeps its memory across a snapshot, where runsc can save
// its bridge's listening socket (newer than 2022-12-19; the older one's
// snapshot keeps files only, checked instead). The resumed box reaches
// the proxy through a socket of its own with the session's rules of the
// moment: rules changed while it was snapshotted hold, and x survives;
// each fork of a memory snapshot reaches the proxy through its own
// socket, whose log holds its own decision. WARDEN_E2E_RUNSC picks the
// server's runsc (runscEnv).
func TestMemorySnapshotEgress(t *testing.T) {
	requireBackend(t, "gvisor")
	n := startInternet(t)
	hp := strconv.Itoa(n.httpPort)
	runsc, flags := serverRunsc(t)
	srv := startServer(t, append(backendArgs("gvisor"), flags...)...)
	id := srv.newSession(t, keyA, map[string]any{"network": map[string]any{"mode": "proxy", "allow": []string{"allowed.test:" + hp}}})
	curl := map[string]any{"command": []string{"curl", "-s", "--max-time", "20", "http://allowed.test:" + hp + "/m"}}
	reach := func(what, sid, want string) {
		t.Helper()
		var r spec.Result
		srv.jsonCall(t, keyA, "POST", sessionPath(sid, "/exec"), curl, http.StatusOK, &r)
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("%s: curl = %q %q, want %q", what, r.Stdout, r.Stderr, want)
		}
	}
	if r := srv.code(t, keyA, id, "python", "x = 42", nil); r.ExitCode != 0 {
		t.Fatalf("python: %+v", r)
	}
	reach("before the snapshot", id, "hello from the internet, /m")

	var snap snapshotted
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/snapshot"), nil, http.StatusOK, &snap)
	if !runscSavesListeners(runsc) {
		if snap.Snapshot == nil || snap.Snapshot.Memory {
			t.Errorf("snapshot on a runsc that cannot save a listener = %+v, want files only", snap)
		}
		reach("resumed from files", id, "hello from the internet, /m")
		t.Log("this runsc cannot save the bridge's listening socket: the snapshot kept files only, as it must")
		return
	}
	if snap.State != "snapshotted" || snap.Snapshot == nil || !snap.Snapshot.Memory {
		srv.stop()
		logs, _ := srv.exit()
		t.Fatalf("snapshot = %+v, want snapshotted with its memory; the server's log:\n%s", snap, logs)
	}
	srv.jsonCall(t, keyA, "PUT", sessionPath(id, "/network"), map[string]any{"allow": []string{"other.test"}}, http.StatusOK, nil)
	reach("resumed with rules changed while snapshotted", id, "warden egress: denied")
	if r := srv.code(t, keyA, id, "python", "print(x)", nil); r.Stdout != "42\n" {
		t.Errorf("x after the resume: %q %q, want 42", r.Stdout, r.Stderr)
	}
	srv.jsonCall(t, keyA, "PUT", sessionPath(id, "/network"), map[string]any{"allow": []string{"allowed.test:" + hp}}, http.StatusOK, nil)
	reach("resumed, the rule given back", id, "hello from the internet, /m")

	snapshotMemory(t, srv, id)
	var forks struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/fork"), map[string]any{"count": 2}, http.StatusCreated, &forks)
	if len(forks.Sessions) != 2 {
		t.Fatalf("fork = %+v, want two sessions", forks)
	}
	for _, f := range forks.Sessions {
		reach("fork "+f.ID, f.ID, "hello from the internet, /m")
		var log struct {
			Events []spec.NetworkEvent `json:"events"`
		}
		srv.jsonCall(t, keyA, "GET", sessionPath(f.ID, "/network"), nil, http.StatusOK, &log)
		if len(log.Events) != 1 || !log.Events[0].Allowed {
			t.Errorf("fork %s: network log %+v, want its own one allowed request", f.ID, log.Events)
		}
		if r := srv.code(t, keyA, f.ID, "python", "print(x)", nil); r.Stdout != "42\n" {
			t.Errorf("fork %s: x = %q %q, want 42", f.ID, r.Stdout, r.Stderr)
		}
	}
}

// runscEnv names the runsc the test's gVisor servers run (their
// --runsc), to test a runsc other than the one they find
// (gvisor.FindRunsc: the pinned one, else Debian's on PATH).
const runscEnv = "WARDEN_E2E_RUNSC"

// runscFlags are the flags that give a test's gVisor server runscEnv's
// runsc, if it is set.
func runscFlags() []string {
	if p := os.Getenv(runscEnv); p != "" {
		return []string{"--runsc", p}
	}
	return nil
}

// serverRunsc is the runsc the server will run and the flags that pick
// it.
func serverRunsc(t *testing.T) (string, []string) {
	t.Helper()
	if p := os.Getenv(runscEnv); p != "" {
		return p, []string{"--runsc", p}
	}
	p, err := gvisor.FindRunsc("")
	if err != nil {
		t.Fatal(err)
	}
	return p, nil
}

// runscSavesListeners says whether runsc can save a listening TCP
// socket, asked of the gvisor backend's own check for a stream box with
// the egress proxy (gvisor.Runtime.SavesEgress), whose every question to
// runsc is bounded in time.
func runscSavesListeners(runsc string) bool {
	return (&gvisor.Runtime{Runsc: runsc, Stream: true}).SavesEgress() == nil
}
