package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMeasureMemoryResume (WARDEN_MEASURE=1; WARDEN_MEASURE_ROUNDS
// rounds, default 3) measures, through the HTTP API, a resume from a
// memory snapshot (gvisor over the stream) against a files-only one
// (gvisor over descriptors) of a session whose Python holds 200 MB of
// random bytes, each to the interpreter's first answer, and a pause and
// resume on both; the two servers run at once and every round does one
// of each, so both see the same load. With WARDEN_NEW_RUNSC (a runsc
// that restores in the background, as /opt/runsc-new/runsc) a third
// server, gvisor over the stream on it, resumes from memory too. It logs
// each round, the medians and every kind's p50 and p99 (nearest rank);
// docs/sessions.md keeps the figures.
func TestMeasureMemoryResume(t *testing.T) {
	if os.Getenv("WARDEN_MEASURE") == "" {
		t.Skip("a measurement: set WARDEN_MEASURE=1")
	}
	requireBackend(t, "gvisor")
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("WARDEN_MEASURE_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	kinds := []resumeKind{
		{"memory", startServer(t, append(backendArgs("gvisor"), "--state-dir", filepath.Join(t.TempDir(), "s"))...), true},
		{"files", startServer(t, append(backendArgs(gvisorFD), "--state-dir", filepath.Join(t.TempDir(), "s"))...), false},
	}
	if newRunsc := os.Getenv("WARDEN_NEW_RUNSC"); newRunsc != "" {
		srv := startServer(t, append(backendArgs("gvisor"), "--runsc", newRunsc, "--state-dir", filepath.Join(t.TempDir(), "s"))...)
		kinds = append(kinds, resumeKind{"memory, new runsc", srv, true})
	}
	took := map[string][]time.Duration{}
	for round := range rounds {
		for _, k := range kinds {
			pause, resume := measureOne(t, k.srv, k.memory)
			took[k.name+" pause+resume"] = append(took[k.name+" pause+resume"], pause)
			took[k.name+" resume"] = append(took[k.name+" resume"], resume)
			load, _ := os.ReadFile("/proc/loadavg")
			t.Logf("round %d %s: pause and resume to the next answer %v, snapshot resume to the first answer %v (load %s)", round, k.name, pause, resume, strings.Fields(string(load))[0])
		}
	}
	med := func(key string) time.Duration {
		d := slices.Clone(took[key])
		slices.Sort(d)
		return d[len(d)/2]
	}
	t.Logf("medians of %d: resume from memory %v, from files %v (%.2fx); pause+resume on the memory server %v, on the files one %v (%.2fx)",
		rounds, med("memory resume"), med("files resume"), float64(med("memory resume"))/float64(med("files resume")),
		med("memory pause+resume"), med("files pause+resume"), float64(med("memory pause+resume"))/float64(med("files pause+resume")))
	for _, k := range kinds {
		d := slices.Clone(took[k.name+" resume"])
		slices.Sort(d)
		t.Logf("%s: resume p50 %v, p99 %v of %d", k.name, d[(len(d)+1)/2-1], d[max(0, (99*len(d)+99)/100-1)], len(d))
	}
}

// resumeKind is one server of TestMeasureMemoryResume and whether its
// snapshots keep memory.
type resumeKind struct {
	name   string
	srv    *apiServer
	memory bool
}

// measureOne makes a session on srv holding 200 MB in Python, times a
// pause and resume to the interpreter's next answer, snapshots it (with
// its memory or not, as memory says) and times the resume to the
// interpreter's first answer; the session is deleted after.
func measureOne(t *testing.T, srv *apiServer, memory bool) (pause, resume time.Duration) {
	t.Helper()
	id := srv.newSession(t, keyA, nil)
	defer srv.call(t, keyA, "DELETE", sessionPath(id), nil, "")
	if r := srv.code(t, keyA, id, "python", "import os\nb = os.urandom(200 << 20)\nx = 42", nil); r.ExitCode != 0 {
		t.Fatalf("python: %+v", r)
	}
	begin := time.Now()
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/pause"), nil, http.StatusOK, nil)
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/resume"), nil, http.StatusOK, nil)
	if r := srv.code(t, keyA, id, "python", "x", nil); r.Value != "42" {
		t.Fatalf("x after a pause: %+v", r)
	}
	pause = time.Since(begin)
	var snap snapshotted
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/snapshot"), nil, http.StatusOK, &snap)
	if snap.Snapshot == nil || snap.Snapshot.Memory != memory {
		t.Fatalf("snapshot %+v, want memory %v", snap.Snapshot, memory)
	}
	begin = time.Now()
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/resume"), nil, http.StatusOK, nil)
	want := "False"
	if memory {
		want = "True"
	}
	if r := srv.code(t, keyA, id, "python", "len(globals().get('b', b'')) == 200 << 20", nil); r.Value != want {
		t.Fatalf("after the resume: %+v, want %s", r, want)
	}
	return pause, time.Since(begin)
}

// TestMeasurePauseBaseline (WARDEN_MEASURE=1, WARDEN_BASELINE_BIN a
// warden binary of the code before memory snapshots;
// WARDEN_MEASURE_ROUNDS) measures a pause and resume to a Python
// interpreter's next answer on gvisor over the stream on that binary and
// on this tree's, alternated, to show memory snapshots left pause and
// resume as they were.
func TestMeasurePauseBaseline(t *testing.T) {
	base := os.Getenv("WARDEN_BASELINE_BIN")
	if os.Getenv("WARDEN_MEASURE") == "" || base == "" {
		t.Skip("a measurement: set WARDEN_MEASURE=1 and WARDEN_BASELINE_BIN")
	}
	requireBackend(t, "gvisor")
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("WARDEN_MEASURE_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	servers := []struct {
		name string
		srv  *apiServer
	}{
		{"before", startServerBin(t, nil, base, backendArgs("gvisor")...)},
		{"after", startServer(t, backendArgs("gvisor")...)},
	}
	ids := make([]string, len(servers))
	for i, s := range servers {
		ids[i] = s.srv.newSession(t, keyA, nil)
		if r := s.srv.code(t, keyA, ids[i], "python", "x = 42", nil); r.ExitCode != 0 {
			t.Fatalf("python: %+v", r)
		}
	}
	took := map[string][]time.Duration{}
	for round := range rounds {
		for i, s := range servers {
			begin := time.Now()
			s.srv.jsonCall(t, keyA, "POST", sessionPath(ids[i], "/pause"), nil, http.StatusOK, nil)
			s.srv.jsonCall(t, keyA, "POST", sessionPath(ids[i], "/resume"), nil, http.StatusOK, nil)
			if r := s.srv.code(t, keyA, ids[i], "python", "x", nil); r.Value != "42" {
				t.Fatalf("x after a pause: %+v", r)
			}
			took[s.name] = append(took[s.name], time.Since(begin))
			load, _ := os.ReadFile("/proc/loadavg")
			t.Logf("round %d %s: %v (load %s)", round, s.name, took[s.name][round], strings.Fields(string(load))[0])
		}
	}
	med := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	t.Logf("medians of %d: before %v, after %v (%.2fx)", rounds, med(took["before"]), med(took["after"]), float64(med(took["after"]))/float64(med(took["before"])))
}
