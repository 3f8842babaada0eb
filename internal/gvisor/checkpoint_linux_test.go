package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// heldBytes is what the Python process of the checkpoint tests holds: the
// 200 MB of issue 22's target.
const heldBytes = 200 << 20

// pyServer is a Python process that keeps x and heldBytes of data in its
// memory and answers questions about them on a unix socket in the box.
// Its stdio is the box's /dev/null, so it holds no descriptor from the
// host, which gVisor could not save.
const pyServer = `
import os, random, socket, zlib
x = 42
big = bytearray(random.randbytes(%d))
s = socket.socket(socket.AF_UNIX)
s.bind("/tmp/py.sock.new")
s.listen(1)
os.rename("/tmp/py.sock.new", "/tmp/py.sock")
answers = {
    "x": lambda: "%%d %%d %%08x" %% (x, len(big), zlib.crc32(big)),
    "urandom": lambda: os.urandom(8).hex(),
    "random": lambda: repr(random.random()),
}
while True:
    c, _ = s.accept()
    q = c.recv(64).decode().strip()
    c.sendall(answers.get(q, lambda: "?")().encode())
    c.close()
`

// pyAsk asks the Python process of pyServer one question, from an exec.
const pyAsk = `python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect("/tmp/py.sock"); s.sendall(sys.argv[1].encode()); print(s.recv(4096).decode())' `

// startPython starts pyServer in sess as a process of the session (not
// an exec's, which the agent sweeps when the exec ends) and waits for its
// socket.
func startPython(t *testing.T, sess *agent.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var files []*os.File
	for range 3 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	script := fmt.Sprintf(pyServer, heldBytes)
	_, err := sess.Spawn(ctx, interp.Command{
		Argv:  []string{"sh", "-c", `exec python3 -c "$0" </dev/null >/dev/null 2>&1`, script},
		Env:   sess.Env(),
		Files: files,
	})
	if err != nil {
		t.Fatalf("starting python: %v", err)
	}
	run(t, sess, "for i in $(seq 600); do test -S /tmp/py.sock && exit 0; sleep 0.1; done; exit 1")
}

// checkpoint checkpoints sess with o into a new directory under t's and
// closes it; it returns the directory.
func checkpoint(t *testing.T, r *Runtime, sess *agent.Session, o CheckpointOptions) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ckpt")
	ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
	defer cancel()
	if err := r.Checkpoint(ctx, sess, dir, o); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	select {
	case <-sess.Done():
		if err := sess.Err(); !errors.Is(err, agent.ErrSaved) {
			t.Errorf("the checkpointed session's Err() = %v, want agent.ErrSaved", err)
		}
	default:
		t.Errorf("the checkpointed session is not done")
	}
	if err := sess.Close(); err != nil {
		t.Errorf("closing the checkpointed box: %v", err)
	}
	return dir
}

// restore restores a box of s from dir, closed when t ends.
func restore(t *testing.T, r *Runtime, s spec.Spec, dir string) *agent.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
	defer cancel()
	sess, err := r.Restore(ctx, s, dir)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	t.Cleanup(func() {
		if err := sess.Close(); err != nil {
			t.Errorf("closing the restored box: %v", err)
		}
	})
	return sess
}

// TestCheckpointRestore: a Python process holding x = 42 and 200 MB,
// and the box's files, survive a checkpoint, in each of two boxes
// restored from it (a fork); the kernel's random numbers differ between
// the two, Python's own random module repeats (documented).
func TestCheckpointRestore(t *testing.T) {
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	r := &Runtime{}
	s := spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}
	sess := startBoxOn(t, r, s)
	run(t, sess, "echo kept > /workspace/f; echo tmp > /tmp/g")
	startPython(t, sess)
	want := run(t, sess, pyAsk+"x")
	if prefix := fmt.Sprintf("42 %d ", heldBytes); !strings.HasPrefix(want, prefix) {
		t.Fatalf("before the checkpoint: got %q, want %q and a checksum", want, prefix)
	}
	// pyServer runs, on the box's own /dev/null.
	dir := checkpoint(t, r, sess, CheckpointOptions{Running: true})
	var urandom, random []string
	for i := range 2 {
		copy := restore(t, r, s, dir)
		cases := []struct{ name, script, want string }{
			{"python's memory", pyAsk + "x", want},
			{"files", "cat /workspace/f /tmp/g", "kept\ntmp"},
			{"a new exec", "echo $((6*7))", "42"},
			{"as the sandbox user, under seccomp", "id -u; grep -c '^Seccomp:[[:space:]]*2' /proc/self/status", "1000\n1"},
		}
		for _, c := range cases {
			if got := run(t, copy, c.script); got != c.want {
				t.Errorf("copy %d, %s: got %q, want %q", i, c.name, got, c.want)
			}
		}
		urandom = append(urandom, run(t, copy, pyAsk+"urandom"))
		random = append(random, run(t, copy, pyAsk+"random"))
		id := r.boxOf(copy).id
		if err := copy.Close(); err != nil {
			t.Errorf("closing copy %d: %v", i, err)
		}
		if ids, _ := filepath.Glob(filepath.Join(StateDir, "runsc", "*_sandbox:"+id+".state")); len(ids) > 0 {
			t.Errorf("copy %d, closed, left its runsc container's record: %v", i, ids)
		}
	}
	if urandom[0] == urandom[1] {
		t.Errorf("both copies read %s from os.urandom: the kernel's random state repeats", urandom[0])
	}
	t.Logf("random.random() in the two copies: %v (process memory: documented to repeat)", random)
}

// TestCheckpointRefusesHostPipes: a persistent interpreter the host
// drives holds the host's pipes, which gVisor cannot save: Checkpoint
// refuses the box while it runs, leaving no directory and the box
// running; told to go on (Running), runsc fails and ends the box, as
// CheckpointOptions says.
func TestCheckpointRefusesHostPipes(t *testing.T) {
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	r := &Runtime{}
	sess := startBoxOn(t, r, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
	py, err := interp.New("python", sess, sess.Env())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := py.Close(); err != nil {
			t.Errorf("closing the interpreter: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
	defer cancel()
	if out, err := py.Run(ctx, "x = 42", nil, nil); err != nil || out.Exception != nil {
		t.Fatalf("python: %+v, %v", out, err)
	}
	for _, o := range []CheckpointOptions{{}, {Running: true}} {
		dir := filepath.Join(t.TempDir(), "ckpt")
		want := ErrCannotCheckpoint
		if o.Running {
			want = ErrSaveFailed
		}
		if err := r.Checkpoint(ctx, sess, dir, o); !errors.Is(err, want) || errors.Is(err, agent.ErrSaved) {
			t.Errorf("checkpoint with an interpreter, %+v: got %v, want %v", o, err, want)
		}
		if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("the failed checkpoint left %s: %v", dir, serr)
		}
		if o.Running {
			break
		}
		if out, err := py.Run(ctx, "x", nil, nil); err != nil || out.Value != "42" {
			t.Errorf("the interpreter after the refused checkpoint: %+v, %v", out, err)
		}
	}
	select {
	case <-sess.Done():
	case <-time.After(time.Minute):
		t.Errorf("the box runs on after runsc failed to save it")
	}
}

// TestRestoreRefuses: Restore names what is wrong with a directory that
// is no checkpoint of a box for the spec, before it starts anything.
func TestRestoreRefuses(t *testing.T) {
	s := spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}
	proxy := s
	proxy.Network.Mode = spec.NetProxy
	tests := []struct {
		name, record string
		s            spec.Spec
		want         string
		// noImage leaves out checkpoint.img; dirImage makes it a directory;
		// pages writes empty pages files beside it; stream restores with a
		// Runtime over the stream.
		noImage, dirImage, pages, stream bool
	}{
		{name: "no record", s: s, want: "is not a gvisor checkpoint"},
		{name: "not json", record: "{", s: s, want: "the record of checkpoint"},
		{name: "an older format", record: `{"format":1}`, s: s, want: "has format 1, this warden reads 2: take the checkpoint again"},
		{name: "too long", record: `{"format":2,"root_dir":"` + strings.Repeat("x", maxRecord) + `"}`, s: s, want: "longer than"},
		{name: "another transport", record: `{"format":2,"stream":true,"resume_nonce":"00112233445566778899aabbccddeeff"}`, s: s, want: "taken over the stream transport"},
		{name: "stream without a nonce", record: `{"format":2,"stream":true}`, s: s, want: "no resume nonce of 16 bytes"},
		{name: "stream with a short nonce", record: `{"format":2,"stream":true,"resume_nonce":"0011"}`, s: s, want: "no resume nonce of 16 bytes"},
		{name: "another root", record: `{"format":2,"root_dir":"/elsewhere"}`, s: s, want: "another root"},
		{name: "egress proxy", record: `{"format":2}`, s: proxy, want: "egress proxy"},
		{name: "a proxy box restored without", record: `{"format":2,"proxy":true}`, s: s,
			want: "taken of a box with network mode proxy, and the spec asks for none: restore it with network mode proxy"},
		{name: "a box without the proxy restored with it", record: `{"format":2,"stream":true,"resume_nonce":"00112233445566778899aabbccddeeff"}`,
			s: proxy, stream: true, want: "taken of a box with network mode none, and the spec asks for proxy"},
		{name: "unknown field", record: `{"format":2,"extra":1}`, s: s, want: "unknown field"},
		{name: "last id too large", record: `{"format":2,"last_id":18446744073709551615}`, s: s, want: "last process ID"},
		{name: "no image", record: `{"format":2}`, s: s, want: "has no image checkpoint.img", noImage: true},
		{name: "image not a file", record: `{"format":2}`, s: s, want: "not a regular file", dirImage: true},
		{name: "uncompressed without its pages", record: `{"format":2,"uncompressed":true,"pages_bytes":4096}`, s: s, want: "has no image pages_meta.img"},
		{name: "uncompressed without a pages size", record: `{"format":2,"uncompressed":true}`, s: s, pages: true, want: "gives its pages no size"},
		{name: "pages cut short", record: `{"format":2,"uncompressed":true,"pages_bytes":4096}`, s: s, pages: true,
			want: "pages.img is 0 bytes, its record says 4096: the disk lost part of it"},
		{name: "disk too small", record: fmt.Sprintf(`{"format":2,"scratch_bytes":%d}`, s.Limits.DiskBytes+1), s: s,
			want: fmt.Sprintf("raise the disk limit to at least %d bytes", s.Limits.DiskBytes+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			img := filepath.Join(dir, checkpointImage)
			switch {
			case tt.dirImage:
				if err := os.Mkdir(img, 0o700); err != nil {
					t.Fatal(err)
				}
			case !tt.noImage:
				if err := os.WriteFile(img, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tt.pages {
				for _, name := range []string{checkpointPagesMeta, checkpointPages} {
					if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tt.record != "" {
				if err := os.WriteFile(filepath.Join(dir, checkpointRecord), []byte(tt.record), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := (&Runtime{Runsc: "/nonexistent/runsc", Stream: tt.stream}).Restore(context.Background(), tt.s, dir)
			if !errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Restore() = %v, want ErrInvalid saying %q", err, tt.want)
			}
		})
	}
}

// TestCheckpointPaused: a paused box (frozen on the ptrace platform, or
// paused by its sentry on systrap, which the checkpoint turns into a
// runsc pause) checkpoints as a running one does, its session closes
// cleanly, and its restored copy runs.
func TestCheckpointPaused(t *testing.T) {
	requireRunsc(t)
	for _, platform := range []string{freezablePlatform, "systrap"} {
		t.Run(platform, func(t *testing.T) {
			r := &Runtime{Platform: platform}
			s := spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}
			sess := startBoxOn(t, r, s)
			run(t, sess, "echo kept > /tmp/a")
			if err := sess.Pause(context.Background()); err != nil {
				t.Fatalf("pausing: %v", err)
			}
			if platform == freezablePlatform {
				requireFrozen(t, r, sess)
			} else if !r.boxOf(sess).pz.sentryPaused.Load() {
				t.Fatal("the systrap box was not paused by its sentry")
			}
			dir := checkpoint(t, r, sess, CheckpointOptions{})
			if got := run(t, restore(t, r, s, dir), "cat /tmp/a"); got != "kept" {
				t.Errorf("the restored copy of a paused box: got %q, want kept", got)
			}
		})
	}
}

// TestCheckpointSwapToHost: a process in the box keeps swapping a
// directory of its /tmp for a link to a host directory (a test's, with a
// marker file) while the host checkpoints it and a Resume is tried over
// and over: the copy follows no link, so the marker is not in the
// checkpoint, and the Resumes wait for the checkpoint (they find the
// session ended, never the box resumed mid-copy).
func TestCheckpointSwapToHost(t *testing.T) {
	requireRunsc(t)
	r := &Runtime{}
	sess := startBoxOn(t, r, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
	host := t.TempDir()
	const marker = "warden-test-marker"
	if err := os.WriteFile(filepath.Join(host, marker), []byte(marker), 0o644); err != nil {
		t.Fatal(err)
	}
	swap := fmt.Sprintf(`for i in $(seq 200000); do rm -rf /tmp/d; mkdir -p /tmp/d/e; rm -rf /tmp/d; ln -s %s /tmp/d; done`, host)
	ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
	defer cancel()
	if _, err := sess.Spawn(ctx, interp.Command{
		Argv:  []string{"sh", "-c", `exec sh -c "$0" </dev/null >/dev/null 2>&1`, swap},
		Env:   sess.Env(),
		Files: devNulls(t),
	}); err != nil {
		t.Fatalf("starting the swapper: %v", err)
	}
	run(t, sess, "for i in $(seq 600); do test -e /tmp/d && exit 0; sleep 0.1; done; exit 1")
	stop := make(chan struct{})
	resumes := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 100000 && err == nil; i++ {
			select {
			case <-stop:
				i = 100000
			default:
				err = sess.Resume(context.Background())
			}
		}
		resumes <- err
	}()
	dir := filepath.Join(t.TempDir(), "ckpt")
	err := r.Checkpoint(ctx, sess, dir, CheckpointOptions{Running: true})
	close(stop)
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if rerr := <-resumes; rerr != nil && !errors.Is(rerr, agent.ErrSessionEnded) {
		t.Errorf("a Resume during the checkpoint: %v, want nil or the session ended", rerr)
	}
	if err := sess.Close(); err != nil {
		t.Errorf("closing the checkpointed box: %v", err)
	}
	werr := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == marker {
			t.Errorf("the host's marker was copied into the checkpoint at %s", p)
		}
		return err
	})
	if werr != nil {
		t.Errorf("walking the checkpoint: %v", werr)
	}
}

// devNulls is three opens of /dev/null, a process's stdio that holds no
// pipe of the host's.
func devNulls(t *testing.T) []*os.File {
	t.Helper()
	var files []*os.File
	for range 3 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		files = append(files, f)
	}
	return files
}

// TestRestoreBadImage: a checkpoint whose image runsc cannot load ends
// the restored session, which says why in runsc's own words.
func TestRestoreBadImage(t *testing.T) {
	requireRunsc(t)
	r := &Runtime{}
	s := spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}
	dir := t.TempDir()
	for name, data := range map[string]string{checkpointRecord: `{"format":2}`, checkpointImage: "not an image"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, checkpointFiles), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
	defer cancel()
	sess, err := r.Restore(ctx, s, dir)
	if err == nil {
		defer sess.Close()
		select {
		case <-sess.Done():
			<-sess.Exited()
		case <-ctx.Done():
			t.Fatal("the session restored from a bad image runs on")
		}
		err = sess.Err()
	}
	t.Logf("restoring a bad image: %v", err)
	if err == nil || !strings.Contains(err.Error(), "runsc:") || strings.Contains(err.Error(), "\n") {
		t.Errorf("restoring a bad image: %v, want one line with runsc's words", err)
	}
}

// TestWriteRecordRefusesTooLong: a record longer than Restore reads is
// not written, and the checkpoint is refused (ErrCannotCheckpoint), so
// no checkpoint is taken that its restore would refuse.
func TestWriteRecordRefusesTooLong(t *testing.T) {
	// Each entry the element type's zero value (big[0], never set), so
	// the test holds whatever an unfinished process records.
	big := agent.Unfinished{}
	for id := range uint64(maxRecord / 8) {
		big[id+1] = big[0]
	}
	for _, tt := range []struct {
		name string
		rec  record
		ok   bool
	}{
		{"small", record{Format: checkpointFormat, LastID: 3, Unfinished: agent.Unfinished{3: big[0]}}, true},
		{"too many unfinished", record{Format: checkpointFormat, LastID: uint64(len(big)), Unfinished: big}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			err := writeRecord(dir, tt.rec)
			_, serr := os.Stat(filepath.Join(dir, checkpointRecord))
			switch {
			case tt.ok && (err != nil || serr != nil):
				t.Errorf("writeRecord() = %v (record %v), want it written", err, serr)
			case !tt.ok && (!errors.Is(err, ErrCannotCheckpoint) || serr == nil):
				t.Errorf("writeRecord() = %v (record written: %v), want ErrCannotCheckpoint and none", err, serr == nil)
			}
			if tt.ok {
				if _, err := readRecord(dir); err != nil {
					t.Errorf("readRecord() of the written record = %v", err)
				}
			}
		})
	}
}

// TestCutError: a refusal met after a stream box's cut is told as a
// failed checkpoint, never as a refusal (which says the box runs on);
// without a stream, and for other errors, the error is kept.
func TestCutError(t *testing.T) {
	refused := fmt.Errorf("%w: the record is too long", ErrCannotCheckpoint)
	for _, tc := range []struct {
		name          string
		stream        bool
		err           error
		refusal, fail bool
	}{
		{"refusal after the cut", true, refused, false, true},
		{"refusal without a stream", false, refused, true, false},
		{"save failed after the cut", true, fmt.Errorf("%w: killed", ErrSaveFailed), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cutError(tc.stream, tc.err)
			if r := errors.Is(got, ErrCannotCheckpoint); r != tc.refusal {
				t.Errorf("cutError(%v, %v) = %v: a refusal %v, want %v", tc.stream, tc.err, got, r, tc.refusal)
			}
			if f := errors.Is(got, agent.ErrCheckpointFailed); f != tc.fail {
				t.Errorf("cutError(%v, %v) = %v: a failed checkpoint %v, want %v", tc.stream, tc.err, got, f, tc.fail)
			}
			if !strings.Contains(got.Error(), "the record is too long") && !strings.Contains(got.Error(), "killed") {
				t.Errorf("cutError(%v, %v) = %v: the cause is lost", tc.stream, tc.err, got)
			}
		})
	}
}
