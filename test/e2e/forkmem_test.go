package e2e

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gvisorArgs are the flags of a gVisor server (over the stream, its default) keeping
// state in stateDir, with runscEnv's runsc if it is set.
func gvisorArgs(stateDir string) []string {
	return append(append(backendArgs("gvisor"), "--state-dir", stateDir), runscFlags()...)
}

// forkIDs forks session id into count new sessions and returns their ids.
func forkIDs(t *testing.T, srv *apiServer, id string, count int) []string {
	t.Helper()
	return forkWith(t, srv, id, map[string]any{"count": count})
}

// forkWith forks session id with request body req and returns the new
// sessions' ids.
func forkWith(t *testing.T, srv *apiServer, id string, req map[string]any) []string {
	t.Helper()
	count := req["count"].(int)
	var out struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/fork"), req, http.StatusCreated, &out)
	if len(out.Sessions) != count {
		t.Fatalf("fork = %+v, want %d sessions", out, count)
	}
	var ids []string
	for _, s := range out.Sessions {
		ids = append(ids, s.ID)
	}
	return ids
}

// stateOf is session id's state.
func stateOf(t *testing.T, srv *apiServer, id string) string {
	t.Helper()
	var s sessionState
	srv.jsonCall(t, keyA, "GET", sessionPath(id), nil, http.StatusOK, &s)
	return s.State
}

// TestForkRunningGVisorStream: on gVisor over the stream transport a
// fork of a RUNNING session copies its memory: two forks of a session
// holding x = 42 both see x and draw different random.random() numbers
// (reseeded), and the source runs on after the fork, x kept; a fork
// with "memory": false copies the file but not x, the source untouched;
// a fork of a PAUSED one copies its files only and leaves it paused,
// which a use resumes with x.
func TestForkRunningGVisorStream(t *testing.T) {
	requireBackend(t, "gvisor")
	srv := startServer(t, gvisorArgs(filepath.Join(t.TempDir(), "state"))...)
	id := srv.newSession(t, keyA, nil)
	if r := srv.code(t, keyA, id, "python", "import random\nx = 42\nopen('/workspace/f', 'w').write('kept')", nil); r.ExitCode != 0 {
		t.Fatalf("python: %+v", r)
	}
	seen := map[string]bool{}
	for _, f := range forkIDs(t, srv, id, 2) {
		r := srv.code(t, keyA, f, "python", "print(x, open('/workspace/f').read(), random.random())", nil)
		got := strings.Fields(r.Stdout)
		if len(got) != 3 || got[0] != "42" || got[1] != "kept" {
			t.Fatalf("fork %s: %q %q %s, want x = 42, the file and a number", f, r.Stdout, r.Stderr, r.Error)
		}
		if seen[got[2]] {
			t.Errorf("fork %s drew %s, as another fork did: its random state was not reseeded", f, got[2])
		}
		seen[got[2]] = true
	}
	if st := stateOf(t, srv, id); st != "ready" {
		t.Errorf("the running source after the fork: %s, want ready (resumed from its memory)", st)
	}
	if r := srv.code(t, keyA, id, "python", "x += 1\nprint(x)", nil); r.Stdout != "43\n" {
		t.Fatalf("the source after the fork: %q %q %s, want x kept", r.Stdout, r.Stderr, r.Error)
	}

	files := forkWith(t, srv, id, map[string]any{"count": 1, "memory": false})
	if r := srv.code(t, keyA, files[0], "python", "print('x' in globals(), open('/workspace/f').read())", nil); r.Stdout != "False kept\n" {
		t.Errorf("fork with memory false: %q %q %s, want the file and no x", r.Stdout, r.Stderr, r.Error)
	}
	if r := srv.code(t, keyA, id, "python", "print(x)", nil); r.Stdout != "43\n" {
		t.Fatalf("the source after a fork of files: %q %q %s, want x kept", r.Stdout, r.Stderr, r.Error)
	}

	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/pause"), nil, http.StatusOK, nil)
	forks := forkIDs(t, srv, id, 1)
	if r := srv.code(t, keyA, forks[0], "python", "print('x' in globals(), open('/workspace/f').read())", nil); r.Stdout != "False kept\n" {
		t.Errorf("fork of the paused source: %q %q %s, want its files only", r.Stdout, r.Stderr, r.Error)
	}
	if st := stateOf(t, srv, id); st != "paused" {
		t.Errorf("the paused source after the fork: %s, want paused", st)
	}
	if r := srv.code(t, keyA, id, "python", "print(x)", nil); r.Stdout != "43\n" {
		t.Errorf("the paused source resumed after the fork: %q %q %s, want x kept", r.Stdout, r.Stderr, r.Error)
	}
}

// TestForkRunningLatency measures a fork into 10 of a running session
// whose Python holds 100 MB, with its memory (gVisor over the stream)
// and, interleaved round by round, of another such session's files only
// ("memory": false) on the same server, and the bytes a memory snapshot
// of it takes on disk.
func TestForkRunningLatency(t *testing.T) {
	if !*longLoad {
		t.Skip("a measurement, not a check: run it with -long")
	}
	requireBackend(t, "gvisor")
	const rounds, count = 3, 10
	memDir := filepath.Join(t.TempDir(), "state")
	mem := startServer(t, append(gvisorArgs(memDir), "--max-memory-per-key", "0")...)
	hold := "import os, random\nx = 42\nbig = os.urandom(100 << 20)"
	var ids [2]string
	for i := range ids {
		ids[i] = mem.newSession(t, keyA, nil)
		if r := mem.code(t, keyA, ids[i], "python", hold, nil); r.ExitCode != 0 {
			t.Fatalf("python: %+v", r)
		}
	}
	var took [2][]time.Duration
	for range rounds {
		for i, memory := range []bool{true, false} {
			start := time.Now()
			made := forkWith(t, mem, ids[i], map[string]any{"count": count, "memory": memory})
			took[i] = append(took[i], time.Since(start))
			t.Logf("round: memory %v forked in %v", memory, took[i][len(took[i])-1])
			for _, f := range made {
				if code, b := mem.call(t, keyA, "DELETE", sessionPath(f), nil, ""); code != http.StatusNoContent {
					t.Fatalf("DELETE = %d %s", code, b)
				}
			}
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	for i, name := range []string{"with memory", "files only"} {
		t.Logf("fork into %d of a running 100 MB Python, %s: p50 %v p99 %v (%v)", count, name, percentile(took[i], 50), percentile(took[i], 99), took[i])
	}
	t.Logf("p50 ratio memory/files %.2f; load %s", float64(percentile(took[0], 50))/float64(percentile(took[1], 50)), strings.TrimSpace(string(load)))
	snapshotMemory(t, mem, ids[0])
	var n int64
	err := filepath.WalkDir(memDir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a memory snapshot of it: %d bytes under the state directory", n)
}

// TestForkRunningParts times the parts of a fork into 10 of a running
// session whose Python holds 100 MB, on gVisor over the stream: its
// memory snapshot, the fork of that snapshot (what a fork that left the
// source snapshotted would take) and the source's resume from it (what
// resuming it at once adds).
func TestForkRunningParts(t *testing.T) {
	if !*longLoad {
		t.Skip("a measurement, not a check: run it with -long")
	}
	requireBackend(t, "gvisor")
	const rounds, count = 3, 10
	srv := startServer(t, append(gvisorArgs(filepath.Join(t.TempDir(), "state")), "--max-memory-per-key", "0")...)
	id := srv.newSession(t, keyA, nil)
	if r := srv.code(t, keyA, id, "python", "import os\nx = 42\nbig = os.urandom(100 << 20)", nil); r.ExitCode != 0 {
		t.Fatalf("python: %+v", r)
	}
	var parts [3][]time.Duration
	for range rounds {
		start := time.Now()
		snapshotMemory(t, srv, id)
		parts[0] = append(parts[0], time.Since(start))
		start = time.Now()
		made := forkIDs(t, srv, id, count)
		parts[1] = append(parts[1], time.Since(start))
		start = time.Now()
		if r := srv.code(t, keyA, id, "python", "print(x)", nil); r.Stdout != "42\n" {
			t.Fatalf("the source after its resume: %q %q %s", r.Stdout, r.Stderr, r.Error)
		}
		parts[2] = append(parts[2], time.Since(start))
		t.Logf("round: snapshot %v, fork %v, resume %v", parts[0][len(parts[0])-1], parts[1][len(parts[1])-1], parts[2][len(parts[2])-1])
		for _, f := range made {
			if code, b := srv.call(t, keyA, "DELETE", sessionPath(f), nil, ""); code != http.StatusNoContent {
				t.Fatalf("DELETE = %d %s", code, b)
			}
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	for i, name := range []string{"memory snapshot", "fork of the snapshot", "source's resume (and a run)"} {
		t.Logf("%s: p50 %v (%v)", name, percentile(parts[i], 50), parts[i])
	}
	t.Logf("load %s", strings.TrimSpace(string(load)))
}
