package gvisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// requireBackground skips where the runsc a Runtime{} runs (FindRunsc:
// the pinned one where installed, else the one on PATH) cannot restore
// in the background (Debian's runsc 2022-12-19).
func requireBackground(t *testing.T) {
	t.Helper()
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	path, err := (&Runtime{}).runscPath()
	if err != nil {
		t.Fatal(err)
	}
	f, err := runscFeatures(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if !f.background {
		testhost.SkipOrFail(t, path+" has no restore --background (install the pinned runsc: make runsc)")
	}
}

// savedPython starts a box on r whose Python holds x = 42 and 200 MB,
// checkpoints it uncompressed and returns the checkpoint and Python's
// answer before it.
func savedPython(t *testing.T, r *Runtime, s spec.Spec) (dir, want string) {
	t.Helper()
	sess := startBoxOn(t, r, s)
	startPython(t, sess)
	want = run(t, sess, pyAsk+"x")
	if prefix := fmt.Sprintf("42 %d ", heldBytes); !strings.HasPrefix(want, prefix) {
		t.Fatalf("before the checkpoint: got %q, want %q and a checksum", want, prefix)
	}
	dir = checkpoint(t, r, sess, CheckpointOptions{Running: true})
	rec, err := readRecord(dir)
	if err != nil || !rec.Uncompressed || rec.PagesBytes < heldBytes {
		t.Fatalf("the record = %+v, %v; want uncompressed pages of at least %d bytes", rec, err, heldBytes)
	}
	return dir, want
}

// TestBackgroundRestoreImageGone: boxes restored in the background load
// their memory from the descriptors runsc opened, so nothing done to the
// image's path after Restore returned changes what they load: two
// copies restored at once from one image (a fork), the image then
// removed and another written at its path, and one copy checkpointed
// again at once (a new snapshot of the session while it may still load)
// and restored from that, all hold Python's 200 MB as they were.
func TestBackgroundRestoreImageGone(t *testing.T) {
	requireBackground(t)
	r := &Runtime{}
	s := noNet
	dir, want := savedPython(t, r, s)
	copies := make([]*agent.Session, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range copies {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
			defer cancel()
			copies[i], errs[i] = r.Restore(ctx, s, dir)
		})
	}
	wg.Wait()
	for i, sess := range copies {
		if errs[i] != nil {
			t.Fatalf("restoring copy %d: %v", i, errs[i])
		}
		t.Cleanup(func() {
			if err := sess.Close(); err != nil {
				t.Errorf("closing copy %d: %v", i, err)
			}
		})
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 1<<20)
	for i := range junk {
		junk[i] = 0xa5
	}
	for _, name := range []string{checkpointPages, checkpointPagesMeta, checkpointImage} {
		if err := os.WriteFile(filepath.Join(dir, name), junk, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	again := checkpoint(t, r, copies[0], CheckpointOptions{Running: true})
	third := restore(t, r, s, again)
	for i, sess := range []*agent.Session{copies[1], third} {
		if got := run(t, sess, pyAsk+"x"); got != want {
			t.Errorf("copy %d: python's memory after its image went: got %q, want %q", i+1, got, want)
		}
	}
}

// TestBackgroundRestoreLoadFails: an image whose pages end short of
// their map (a disk that lost its last page while the record's size was
// changed alike, so Restore's check passes), restored in the background,
// fails closed: either the load fails before runsc records the box
// running and Restore fails, or, as mostly, it fails after Restore
// returned and the box ends, its session with an error (runsc's exit,
// not naming the load); no answer of Python's differs from the saved one. Which comes
// first is a race inside runsc (its load against its recording the box
// running), so both are accepted and the path taken is logged.
func TestBackgroundRestoreLoadFails(t *testing.T) {
	requireBackground(t)
	r := &Runtime{}
	s := noNet
	dir, want := savedPython(t, r, s)
	rec, err := readRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec.PagesBytes -= 4096
	if err := os.Truncate(filepath.Join(dir, checkpointPages), rec.PagesBytes); err != nil {
		t.Fatal(err)
	}
	if err := writeRecord(dir, rec); err != nil {
		t.Fatal(err)
	}
	runsc, err := r.runscPath()
	if err != nil {
		t.Fatal(err)
	}
	if _, background, err := restoreArgs(context.Background(), &box{runsc: runsc}, rec, dir); err != nil || !background {
		t.Fatalf("restoreArgs = %v, %v; want a background restore", background, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
	defer cancel()
	sess, err := r.Restore(ctx, s, dir)
	if err != nil {
		t.Logf("the load failed before Restore returned: %v", err)
		return
	}
	defer sess.Close()
	res, err := sess.Exec(ctx, agent.ExecSpec{Command: []string{"/bin/sh", "-c", pyAsk + "x"}}, agent.IO{})
	t.Logf("asking python after the restore: %+v, %v", res, err)
	if err == nil && res.ExitCode == 0 && strings.TrimSpace(res.Stdout) != want {
		t.Errorf("python answered %q from an image cut short, want %q or no answer", res.Stdout, want)
	}
	select {
	case <-sess.Exited():
	case <-ctx.Done():
		t.Fatal("the box restored from an image cut short runs on")
	}
	select {
	case <-sess.Done():
	case <-ctx.Done():
		t.Fatal("the session of a box that ended runs on")
	}
	if err := sess.Err(); err == nil {
		t.Error("the session restored from an image cut short ended without an error")
	}
	t.Logf("the load failed after Restore returned: %v", sess.Err())
}

// TestRestoreImageRemovedAtOnce: the checkpoint may be removed as soon
// as Restore returned (awaitRestored: runsc holds the image by then),
// with Debian's runsc (the image read whole) and the default one (in
// the background): Python answers from its memory as before.
func TestRestoreImageRemovedAtOnce(t *testing.T) {
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	runscs := map[string]string{"default runsc": ""}
	if _, err := os.Stat("/usr/bin/runsc"); err == nil {
		runscs["Debian's runsc"] = "/usr/bin/runsc"
	}
	for name, path := range runscs {
		t.Run(name, func(t *testing.T) {
			r := &Runtime{Runsc: path}
			sess := startBoxOn(t, r, noNet)
			startPython(t, sess)
			want := run(t, sess, pyAsk+"x")
			dir := checkpoint(t, r, sess, CheckpointOptions{Running: true})
			restored := restore(t, r, noNet, dir)
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if got := run(t, restored, pyAsk+"x"); got != want {
				t.Errorf("python after its image was removed at once: got %q, want %q", got, want)
			}
		})
	}
}
