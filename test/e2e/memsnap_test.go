package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMemorySnapshotGVisorStream: on gVisor over the stream transport a
// snapshot keeps the box's memory (snapshot.memory is true) and a resume
// restores it: a Python variable set before the snapshot is there after
// a resume on use, and after a SIGKILL of the server and a resume by the
// next one; two forks of a memory snapshot each hold the variable too,
// and draw different random.random() numbers (their random state is
// reseeded), while the source, resumed, still has it.
func TestMemorySnapshotGVisorStream(t *testing.T) {
	requireBackend(t, "gvisor")
	stateDir := filepath.Join(t.TempDir(), "state")
	flags := append(backendArgs("gvisor"), "--state-dir", stateDir)
	s1 := startServer(t, flags...)
	id := s1.newSession(t, keyA, nil)
	if r := s1.code(t, keyA, id, "python", "import random\nx = 42\nopen('/workspace/f', 'w').write('kept')", nil); r.ExitCode != 0 {
		t.Fatalf("python: %+v", r)
	}
	snapshotMemory(t, s1, id)
	if r := s1.code(t, keyA, id, "python", "print(x, open('/workspace/f').read())", nil); r.Stdout != "42 kept\n" {
		t.Fatalf("after a resume on use: %q %q %s, want x and the file kept", r.Stdout, r.Stderr, r.Error)
	}

	snapshotMemory(t, s1, id)
	if err := syscall.Kill(s1.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = s1.exit() // killed: its exit status says only that
	s2 := startServer(t, flags...)
	if r := s2.code(t, keyA, id, "python", "x += 1\nprint(x)", nil); r.Stdout != "43\n" {
		t.Fatalf("after the server's restart: %q %q %s, want x kept", r.Stdout, r.Stderr, r.Error)
	}

	// Met before the snapshot, so every fork starts with the same
	// JavaScript and OpenSSL generators: measured before reseeding, both
	// repeated in two forks (Math.random 0.517208555197396 and RAND_bytes
	// 28ea1b1abafa7672 in each). A fork reseeds OpenSSL's through
	// Python's ssl, and starts JavaScript afresh, as V8's Math.random and
	// Node's crypto cannot be reseeded.
	if r := s2.code(t, keyA, id, "javascript", "globalThis.seen = Math.random()", nil); r.ExitCode != 0 {
		t.Fatalf("javascript: %+v", r)
	}
	if r := s2.code(t, keyA, id, "python", "import ssl\nssl.RAND_bytes(8)", nil); r.ExitCode != 0 {
		t.Fatalf("python ssl: %+v", r)
	}
	snapshotMemory(t, s2, id)
	var forks struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	s2.jsonCall(t, keyA, "POST", sessionPath(id, "/fork"), map[string]any{"count": 2}, http.StatusCreated, &forks)
	if len(forks.Sessions) != 2 {
		t.Fatalf("fork = %+v, want two sessions", forks)
	}
	seen, seenJS, seenSSL := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, f := range forks.Sessions {
		r := s2.code(t, keyA, f.ID, "python", "print(x, random.random())", nil)
		got := strings.Fields(r.Stdout)
		if len(got) != 2 || got[0] != "43" {
			t.Fatalf("fork %s: %q %q %s, want x = 43 and a number", f.ID, r.Stdout, r.Stderr, r.Error)
		}
		if seen[got[1]] {
			t.Errorf("fork %s drew %s, as another fork did: its random state was not reseeded", f.ID, got[1])
		}
		seen[got[1]] = true
		js := s2.code(t, keyA, f.ID, "javascript", "[typeof globalThis.seen, Math.random()].join(' ')", nil)
		ossl := s2.code(t, keyA, f.ID, "python", "ssl.RAND_bytes(8).hex()", nil)
		t.Logf("fork %s: javascript %s, OpenSSL RAND_bytes %s", f.ID, js.Value, ossl.Value)
		if !strings.Contains(js.Value, "undefined") || seenJS[js.Value] {
			t.Errorf("fork %s: javascript %q %s, want a fresh interpreter (seen undefined) drawing its own numbers", f.ID, js.Value, js.Stderr)
		}
		if ossl.Value == "" || seenSSL[ossl.Value] {
			t.Errorf("fork %s: OpenSSL RAND_bytes %q %s, want bytes no other fork drew", f.ID, ossl.Value, ossl.Stderr)
		}
		seenJS[js.Value], seenSSL[ossl.Value] = true, true
	}
	if r := s2.code(t, keyA, id, "python", "print(x)", nil); r.Stdout != "43\n" {
		t.Errorf("the source after the fork: %q %q, want x kept", r.Stdout, r.Stderr)
	}

	// Asked for files only, the same box keeps no memory: x is gone.
	var snap snapshotted
	s2.jsonCall(t, keyA, "POST", sessionPath(id, "/snapshot"), map[string]any{"memory": false}, http.StatusOK, &snap)
	if snap.State != "snapshotted" || snap.Snapshot == nil || snap.Snapshot.Memory {
		t.Fatalf("snapshot with memory false = %+v, want snapshotted, files only", snap)
	}
	if r := s2.code(t, keyA, id, "python", "print('x' in globals(), open('/workspace/f').read())", nil); r.Stdout != "False kept\n" {
		t.Errorf("after a files-only snapshot: %q %q, want fresh interpreters and the file kept", r.Stdout, r.Stderr)
	}
}

// snapshotMemory snapshots session id and fails unless the snapshot
// kept its memory.
func snapshotMemory(t *testing.T, srv *apiServer, id string) {
	t.Helper()
	var snap snapshotted
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/snapshot"), nil, http.StatusOK, &snap)
	if snap.State != "snapshotted" || snap.Snapshot == nil || !snap.Snapshot.Memory {
		t.Fatalf("snapshot = %+v, want snapshotted with its memory", snap)
	}
}
