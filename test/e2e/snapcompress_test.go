package e2e

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/warden-sandbox/warden/internal/gvisor"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestSnapshotCompressionSwitch: a server run with --snapshot-compression
// fast writes a session's memory snapshot compressed (no pages.img under
// the state directory), and the next server, on the same state directory
// with none, resumes it with the interpreter's variable kept; its own
// snapshot is then uncompressed, and a server back on fast resumes that
// one too: either kind resumes whatever the setting is now. It needs a
// runsc that writes both kinds (the pinned one; runscEnv's if set), and
// fails in CI on one that cannot.
func TestSnapshotCompressionSwitch(t *testing.T) {
	requireBackend(t, "gvisor")
	runsc, runscArgs := serverRunsc(t)
	for _, c := range []gvisor.Compression{gvisor.CompressionFast, gvisor.CompressionNone} {
		if err := (&gvisor.Runtime{Runsc: runsc, Stream: true}).WritesCompression(c); err != nil {
			testhost.SkipOrFail(t, "the server's runsc cannot choose its images' compression: "+err.Error())
		}
	}
	state := filepath.Join(t.TempDir(), "state")
	flags := append(append(backendArgs("gvisor"), runscArgs...), "--state-dir", state)
	setting := []string{"fast", "none", "fast"}
	srv := startServer(t, append(flags, "--snapshot-compression", setting[0])...)
	id := srv.newSession(t, keyA, nil)
	if r := srv.code(t, keyA, id, "python", "x = 41", nil); r.ExitCode != 0 {
		t.Fatalf("python: %+v", r)
	}
	for i := range 2 {
		snapshotMemory(t, srv, id)
		pages, err := filepath.Glob(filepath.Join(state, "snapshots", "*.mem", "pages.img"))
		if wantPages := setting[i] == "none"; err != nil || (len(pages) > 0) != wantPages {
			t.Fatalf("snapshot %d by a %s server: pages.img under the state directory %v (%v), want them %v", i, setting[i], pages, err, wantPages)
		}
		if err := syscall.Kill(srv.pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_, _ = srv.exit() // killed: its exit status says only that
		srv = startServer(t, append(flags, "--snapshot-compression", setting[i+1])...)
		if r := srv.code(t, keyA, id, "python", "x += 1\nprint(x)", nil); r.Stdout != []string{"42\n", "43\n"}[i] {
			t.Fatalf("a %s server resuming a %s snapshot: %q %q %s, want x kept", setting[i+1], setting[i], r.Stdout, r.Stderr, r.Error)
		}
	}
}
