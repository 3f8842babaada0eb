package gvisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/testhost"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// streamRounds is how many rounds TestMeasureStreamExec runs.
const streamRounds = 5

// streamOps is how many of each operation a round runs on each box.
const streamOps = 20

// streamStarts is how many boxes TestMeasureStreamExec starts on each
// transport.
const streamStarts = 8

// bigBytes is the size of the measured stdout and file transfers: 10 MB.
const bigBytes = 10 << 20

// streamOp is one measured operation on a live box.
type streamOp struct {
	name string
	run  func(b *measuredBox) error
}

// measuredBox is a live box with what the operations use.
type measuredBox struct {
	sess  *agent.Session
	py    interp.Interpreter
	files workspace.Files
}

// streamMeasureOps are the operations TestMeasureStreamExec times.
var streamMeasureOps = []streamOp{
	{"exec true", func(b *measuredBox) error { return execOK(b.sess, "true") }},
	{"python 1+1", func(b *measuredBox) error { return pyRound(b.py) }},
	{"exec 10 MB stdout", func(b *measuredBox) error { return execOK(b.sess, fmt.Sprintf("head -c %d /dev/zero", bigBytes)) }},
	{"upload 10 MB", func(b *measuredBox) error { return upload(b.files) }},
	{"download 10 MB", func(b *measuredBox) error { return download(b.files) }},
}

// TestMeasureStreamExec compares a gVisor box over the stream transport
// with one over descriptors (issues 21 and 22): the start of a box to
// its first exec's end, then, both boxes live at once, an exec of
// `true`, a persistent Python's 1+1, an exec writing 10 MB to stdout and
// an upload and a download of a 10 MB file. Each kind is interleaved
// between the transports within each round so load falls on both alike;
// it logs p50 and p99 per transport and the ratio of the p50s. It
// asserts no timing (the host is shared); run it with WARDEN_MEASURE=1
// and CGO_ENABLED=0 (PATH picks the runsc).
func TestMeasureStreamExec(t *testing.T) {
	if os.Getenv("WARDEN_MEASURE") == "" {
		t.Skip("set WARDEN_MEASURE=1 to measure execs over the stream transport against descriptors on gVisor")
	}
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	transports := []string{"fd", "stream"}
	starts := map[string][]time.Duration{}
	for i := range 2 * streamStarts {
		name := transports[i%2]
		starts[name] = append(starts[name], timeStart(t, name == "stream"))
	}
	logQuantiles(t, "start to first exec", starts)
	boxes := map[string]*measuredBox{}
	for _, name := range transports {
		boxes[name] = measureBox(t, name == "stream")
	}
	for _, op := range streamMeasureOps {
		took := map[string][]time.Duration{}
		for round := range streamRounds {
			for i := range 2 * streamOps {
				name := transports[(i+round)%2]
				begin := time.Now()
				if err := op.run(boxes[name]); err != nil {
					t.Fatalf("%s over %s, round %d: %v (the box: %s)", op.name, name, round, err, boxState(boxes[name].sess))
				}
				took[name] = append(took[name], time.Since(begin))
			}
		}
		logQuantiles(t, op.name, took)
	}
}

// boxState says whether sess has ended and, if so, why (Session.Err),
// so a failed measurement records the cause, not only the exec's error.
func boxState(sess *agent.Session) string {
	select {
	case <-sess.Done():
		return fmt.Sprintf("ended: %v", sess.Err())
	case <-time.After(2 * time.Second):
		return "still running"
	}
}

// logQuantiles logs p50 and p99 of each transport's durations and the
// stream/fd ratio of the p50s.
func logQuantiles(t *testing.T, what string, took map[string][]time.Duration) {
	t.Helper()
	fd50, st50 := quantile(took["fd"], 0.5), quantile(took["stream"], 0.5)
	t.Logf("%s (n=%d each): fd p50 %v p99 %v; stream p50 %v p99 %v; stream/fd p50 %.2fx",
		what, len(took["fd"]), fd50, quantile(took["fd"], 0.99), st50, quantile(took["stream"], 0.99), float64(st50)/float64(fd50))
}

// quantile is the q-th quantile of d, by nearest rank.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// timeStart starts a box, runs `true` in it and returns how long that
// took; the box is closed after the clock stops.
func timeStart(t *testing.T, stream bool) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	begin := time.Now()
	sess, err := (&Runtime{Stream: stream}).Start(ctx, noNet)
	if err != nil {
		t.Fatalf("starting a box (stream %v): %v", stream, err)
	}
	defer func() {
		if err := sess.Close(); err != nil {
			t.Errorf("closing the box: %v", err)
		}
	}()
	if err := execOK(sess, "true"); err != nil {
		t.Fatalf("the first exec (stream %v): %v", stream, err)
	}
	return time.Since(begin)
}

// measureBox starts a box with a Python interpreter and its files open.
func measureBox(t *testing.T, stream bool) *measuredBox {
	t.Helper()
	sess := startBoxOn(t, &Runtime{Stream: stream}, noNet)
	py, err := interp.New("python", sess, sess.Env())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := py.Close(); err != nil {
			t.Errorf("closing the interpreter: %v", err)
		}
	})
	files, err := boxFiles(sess)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := files.Close(); err != nil {
			t.Errorf("closing the files: %v", err)
		}
	})
	return &measuredBox{sess: sess, py: py, files: files}
}

// boxFiles are sess's files as a session reaches them: through its agent
// when it serves them, else through its workspace descriptor.
func boxFiles(sess *agent.Session) (workspace.Files, error) {
	files, err := sess.RemoteFiles(workspace.Limits{})
	if !errors.Is(err, errors.ErrUnsupported) {
		return files, err
	}
	uid, gid := sess.FileOwner()
	return workspace.FromFile(sess.Workspace(), "/workspace", uid, gid, workspace.Limits{})
}

// execOK runs script in sess, its stdout discarded, and fails unless it
// exits 0.
func execOK(sess *agent.Session, script string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := sess.Exec(ctx, agent.ExecSpec{Command: []string{"sh", "-c", script}}, agent.IO{Stdout: io.Discard})
	if err != nil {
		return fmt.Errorf("%s: %w", script, err)
	}
	if r.ExitCode != 0 {
		return fmt.Errorf("%s: exit %d, stderr %q", script, r.ExitCode, r.Stderr)
	}
	return nil
}

// pyRound runs 1+1 in py and checks the answer.
func pyRound(py interp.Interpreter) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := py.Run(ctx, "1+1", nil, nil)
	if err != nil {
		return fmt.Errorf("python 1+1: %w", err)
	}
	if out.Value != "2" {
		return fmt.Errorf("python 1+1 = %+v, want 2", out)
	}
	return nil
}

// bigFile is the measured transfers' content.
var bigFile = bytes.Repeat([]byte("w"), bigBytes)

// upload writes bigFile to big in files.
func upload(files workspace.Files) error {
	e, err := files.Write("big", bytes.NewReader(bigFile), 0o644)
	if err != nil {
		return fmt.Errorf("uploading 10 MB: %w", err)
	}
	if e.Size != bigBytes {
		return fmt.Errorf("uploading 10 MB: wrote %d bytes", e.Size)
	}
	return nil
}

// download reads big (the upload's, which runs first) from files.
func download(files workspace.Files) error {
	r, _, err := files.Read("big")
	if err != nil {
		return fmt.Errorf("downloading 10 MB: %w", err)
	}
	n, err := io.Copy(io.Discard, r)
	if cerr := r.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil || n != bigBytes {
		return fmt.Errorf("downloading 10 MB: %d bytes: %w", n, err)
	}
	return nil
}
