package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// snapshotted is the part of a snapshotted Session the tests read.
type snapshotted struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Snapshot *struct {
		Memory bool  `json:"memory"`
		Files  int   `json:"files"`
		Bytes  int64 `json:"bytes"`
	} `json:"snapshot"`
}

// TestSnapshotSurvivesKill snapshots a session holding a file and an
// interpreter variable, SIGKILLs the server, and restarts it on the same
// state directory: the session is listed snapshotted, an exec resumes it
// with the file back and a fresh interpreter (files only), and a fork
// (by the CLI) makes sessions holding the file too.
func TestSnapshotSurvivesKill(t *testing.T) {
	requireSandbox(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	s1 := startServer(t, "--state-dir", stateDir)
	id := s1.newSession(t, keyA, map[string]any{"env": map[string]string{"GREETING": "hi"}})
	if code, b := s1.call(t, keyA, "PUT", sessionPath(id, "/files?path=dir/kept.txt"), strings.NewReader("kept"), "application/octet-stream"); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("upload = %d %s", code, b)
	}
	if r := s1.code(t, keyA, id, "python", "x = 41", nil); r.ExitCode != 0 {
		t.Fatalf("python: %+v", r)
	}
	var snap snapshotted
	s1.jsonCall(t, keyA, "POST", sessionPath(id, "/snapshot"), nil, http.StatusOK, &snap)
	if snap.State != "snapshotted" || snap.Snapshot == nil || snap.Snapshot.Memory || snap.Snapshot.Files != 1 {
		t.Fatalf("snapshot = %+v, want snapshotted, 1 file, memory false", snap)
	}
	if err := syscall.Kill(s1.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = s1.exit()

	s2 := startServer(t, "--state-dir", stateDir)
	var got snapshotted
	s2.jsonCall(t, keyA, "GET", sessionPath(id), nil, http.StatusOK, &got)
	if got.State != "snapshotted" {
		t.Fatalf("after the restart: %+v, want snapshotted", got)
	}
	r := s2.code(t, keyA, id, "python", "print(open('/workspace/dir/kept.txt').read(), 'x' in globals())", nil)
	if r.Stdout != "kept False\n" {
		t.Errorf("exec after the restart = %q %q, want the file back and a fresh interpreter", r.Stdout, r.Stderr)
	}
	t.Setenv("WARDEN_URL", s2.url)
	t.Setenv("WARDEN_API_KEY", keyA)
	if inv := warden(t, "", "session", "snapshot", id); inv.code != 0 {
		t.Fatalf("session snapshot = %d %q", inv.code, inv.stderr)
	}
	inv := warden(t, "", "session", "fork", id, "--count", "2")
	forks := strings.Fields(inv.stdout)
	if inv.code != 0 || len(forks) != 2 {
		t.Fatalf("session fork --count 2 = %d %q %q, want two ids", inv.code, inv.stdout, inv.stderr)
	}
	for _, f := range append(forks, id) {
		r := s2.code(t, keyA, f, "bash", "cat /workspace/dir/kept.txt; echo \" $GREETING\"", nil)
		if r.Stdout != "kept hi\n" {
			t.Errorf("session %s: %q %q, want the file and the env", f, r.Stdout, r.Stderr)
		}
	}
}

// TestSnapshotResumeLatency measures, on the native backend with a state
// directory, 30 rounds of a snapshot and a resume from it of a session
// holding one small file (a files-only resume is a box start plus the
// copy), and of a create as the baseline, logging p50 and p99 and their
// ratios. It asserts nothing about speed; docs/sessions.md records what
// it printed. A measurement: it runs with -long only.
func TestSnapshotResumeLatency(t *testing.T) {
	if !*longLoad {
		t.Skip("a measurement, not a check: run it with -long")
	}
	requireSandbox(t)
	const rounds = 30
	srv := startServer(t, "--state-dir", filepath.Join(t.TempDir(), "state"))
	id := srv.newSession(t, keyA, nil)
	if code, b := srv.call(t, keyA, "PUT", sessionPath(id, "/files?path=small.txt"), strings.NewReader("small"), "application/octet-stream"); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("upload = %d %s", code, b)
	}
	var create, snap, resume []time.Duration
	for range rounds {
		start := time.Now()
		made := srv.newSession(t, keyA, nil)
		create = append(create, time.Since(start))
		if code, b := srv.call(t, keyA, "DELETE", sessionPath(made), nil, ""); code != http.StatusNoContent {
			t.Fatalf("DELETE = %d %s", code, b)
		}
		snap = append(snap, timed(t, srv, "POST", sessionPath(id, "/snapshot")))
		resume = append(resume, timed(t, srv, "POST", sessionPath(id, "/resume")))
	}
	base := percentile(create, 50)
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"create (baseline)", create}, {"snapshot", snap}, {"resume from snapshot", resume}} {
		p50, p99 := percentile(m.d, 50), percentile(m.d, 99)
		t.Logf("native %s: p50 %v p99 %v (p50 %.1fx the baseline's)", m.name, p50, p99, float64(p50)/float64(base))
	}
}

// TestForkLatency measures issue 22's case on the native backend: a
// fork into 10 of a session holding 100 MB (10 files of 10 MB), 5
// rounds, with 10 creates one after another as the baseline (a fork is
// 10 creates plus the copies, 4 at a time), logging p50 and p99 and the
// ratio of the p50s, and the server's CPU time for each (the copies are
// the server's: on a busy host the wall time is mostly the wait for a
// core). It asserts nothing about speed; docs/sessions.md
// records what it printed. A measurement: it runs with -long only.
func TestForkLatency(t *testing.T) {
	if !*longLoad {
		t.Skip("a measurement, not a check: run it with -long")
	}
	requireSandbox(t)
	const rounds, count = 5, 10
	srv := startServer(t, "--state-dir", filepath.Join(t.TempDir(), "state"), "--max-memory-per-key", "0")
	id := srv.newSession(t, keyA, nil)
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 10<<20/16)
	for i := range 10 {
		path := sessionPath(id, fmt.Sprintf("/files?path=f%d", i))
		if code, b := srv.call(t, keyA, "PUT", path, bytes.NewReader(chunk), "application/octet-stream"); code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("upload = %d %s", code, b)
		}
	}
	var creates, forks, createCPU, forkCPU []time.Duration
	for range rounds {
		start, cpu := time.Now(), processCPU(t, srv.pid)
		var made []string
		for range count {
			made = append(made, srv.newSession(t, keyA, nil))
		}
		creates, createCPU = append(creates, time.Since(start)), append(createCPU, processCPU(t, srv.pid)-cpu)
		var out struct {
			Sessions []session `json:"sessions"`
		}
		start, cpu = time.Now(), processCPU(t, srv.pid)
		srv.jsonCall(t, keyA, "POST", sessionPath(id, "/fork"), map[string]any{"count": count}, http.StatusCreated, &out)
		forks, forkCPU = append(forks, time.Since(start)), append(forkCPU, processCPU(t, srv.pid)-cpu)
		if len(out.Sessions) != count {
			t.Fatalf("fork made %d sessions, want %d", len(out.Sessions), count)
		}
		for _, f := range out.Sessions {
			made = append(made, f.ID)
		}
		for _, m := range made {
			if code, b := srv.call(t, keyA, "DELETE", sessionPath(m), nil, ""); code != http.StatusNoContent {
				t.Fatalf("DELETE = %d %s", code, b)
			}
		}
	}
	base := percentile(creates, 50)
	for _, m := range []struct {
		name   string
		d, cpu []time.Duration
	}{{"10 creates (baseline)", creates, createCPU}, {"fork of 100 MB into 10", forks, forkCPU}} {
		p50, p99 := percentile(m.d, 50), percentile(m.d, 99)
		t.Logf("native %s: p50 %v p99 %v (p50 %.1fx the baseline's), server CPU p50 %v", m.name, p50, p99, float64(p50)/float64(base), percentile(m.cpu, 50))
	}
}

// processCPU is the CPU time process pid has used, user and system, all
// its threads (/proc/pid/stat, in clock ticks of 10 ms).
func processCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's closing parenthesis, from the third
	// (state): utime and stime are the 14th and 15th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat has %d fields after the command, want at least 13", pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("/proc/%d/stat: %v", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// TestSnapshotBackends: on every backend, a snapshot closes the box and
// keeps the files with their permission bits (never a setuid bit, if the
// sandbox could set one), not a symbolic link, and an exec restores them
// into a fresh box.
func TestSnapshotBackends(t *testing.T) {
	for _, b := range conformanceBackends(t) {
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			srv := startServer(t, "--backend", b, "--state-dir", filepath.Join(t.TempDir(), "state"))
			id := srv.newSession(t, keyA, nil)
			if r := srv.code(t, keyA, id, "bash", "mkdir -p /workspace/d && echo made > /workspace/d/f && chmod 755 /workspace/d/f && ln -s /etc/hostname /workspace/l; chmod 4755 /workspace/d/f 2>/dev/null; true", nil); r.ExitCode != 0 {
				t.Fatalf("setting up: %+v", r)
			}
			var snap snapshotted
			srv.jsonCall(t, keyA, "POST", sessionPath(id, "/snapshot"), nil, http.StatusOK, &snap)
			if snap.State != "snapshotted" || snap.Snapshot == nil || snap.Snapshot.Files != 1 {
				t.Fatalf("snapshot = %+v, want snapshotted with 1 file", snap)
			}
			r := srv.code(t, keyA, id, "python", "import os\nprint(open('/workspace/d/f').read().strip(), oct(os.stat('/workspace/d/f').st_mode & 0o7777), os.path.lexists('/workspace/l'))", nil)
			if r.Stdout != "made 0o755 False\n" {
				t.Errorf("after resume: %q %q, want the file without setuid, no link", r.Stdout, r.Stderr)
			}
		})
	}
}
