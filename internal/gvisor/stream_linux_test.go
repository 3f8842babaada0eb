package gvisor

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// noNet is the spec of the stream tests' boxes: the stream transport
// carries no egress proxy on gVisor.
var noNet = spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}

// fdProbe prints the descriptors above stdio its Python process holds.
const fdProbe = `exec python3 -c '
import fcntl
held = []
for fd in range(3, 1024):
    try:
        fcntl.fcntl(fd, fcntl.F_GETFD)
        held.append(fd)
    except OSError:
        pass
print(held)'`

// TestStreamHiddenAgent runs the same execs over descriptors and over the
// stream transport, both behind the user's agent: the user is uid 1000,
// stdin, stdout, stderr and the exit code come through, the agent's own
// /proc entry stays covered (its PID 1 in the user's namespace) and an
// exec holds no descriptor but its stdio.
func TestStreamHiddenAgent(t *testing.T) {
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	tests := []struct {
		script, stdin, wantOut, wantErr string
		wantCode                        int
	}{
		{"id -u", "", "1000\n", "", 0},
		{"cat; echo oops >&2; exit 3", "hello\n", "hello\n", "oops\n", 3},
		{"ls -A /proc/1 2>/dev/null | wc -l", "", "0\n", "", 0},
		{"head -c 1000000 /dev/zero | wc -c", "", "1000000\n", "", 0},
		// stdio only: no control connection, no pipe of the agent's
		// relays, leaks into the user's processes (gVisor's /proc/N/fd
		// is not listable here, so every descriptor is probed).
		{fdProbe, "", "[]\n", "", 0},
	}
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "fd", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			sess := startBoxOn(t, &Runtime{Stream: stream}, noNet)
			for _, tt := range tests {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				r, err := sess.Exec(ctx, agent.ExecSpec{Command: []string{"sh", "-c", tt.script}}, agent.IO{Stdin: strings.NewReader(tt.stdin)})
				cancel()
				if err != nil {
					t.Fatalf("%s: %v", tt.script, err)
				}
				if r.Stdout != tt.wantOut || r.Stderr != tt.wantErr || r.ExitCode != tt.wantCode {
					t.Errorf("%s: got stdout %q stderr %q exit %d, want %q %q %d", tt.script, r.Stdout, r.Stderr, r.ExitCode, tt.wantOut, tt.wantErr, tt.wantCode)
				}
			}
		})
	}
}

// TestStreamRefusesEgress: the stream transport on gVisor has no way to
// the egress proxy (the bridge stays in the uid-0 agent), so a box asking
// for it is refused before anything starts, with the way out.
func TestStreamRefusesEgress(t *testing.T) {
	s := noNet
	s.Network = spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"example.com"}}
	_, err := (&Runtime{Stream: true}).Start(context.Background(), s)
	if !errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), "use --network none or the descriptor transport") {
		t.Errorf("Start(stream, proxy) = %v, want spec.ErrInvalid naming the way out", err)
	}
}

// streamRounds is how many rounds TestMeasureStreamExec runs.
const streamRounds = 5

// streamExecs is how many execs of each kind a round runs on each box.
const streamExecs = 20

// TestMeasureStreamExec compares an exec on a gVisor box over the stream
// transport with one over descriptors, both boxes live at once and their
// execs interleaved within each round so load falls on both alike: per
// round the median of streamExecs execs of `true` and of `head -c 8M`
// to stdout on each, and the round's ratio stream/fd. It asserts no
// timing (the host is shared); run it with WARDEN_MEASURE=1 and
// CGO_ENABLED=0.
func TestMeasureStreamExec(t *testing.T) {
	if os.Getenv("WARDEN_MEASURE") == "" {
		t.Skip("set WARDEN_MEASURE=1 to measure execs over the stream transport against descriptors on gVisor")
	}
	requireRunsc(t)
	boxes := map[string]*agent.Session{
		"fd":     startBoxOn(t, &Runtime{}, noNet),
		"stream": startBoxOn(t, &Runtime{Stream: true}, noNet),
	}
	for _, script := range []string{"true", "head -c 8388608 /dev/zero"} {
		var ratios []float64
		for round := range streamRounds {
			took := map[string][]time.Duration{}
			for i := range 2 * streamExecs {
				name := []string{"fd", "stream"}[(i+round)%2]
				took[name] = append(took[name], timeExec(t, boxes[name], script))
			}
			fd, st := median(took["fd"]), median(took["stream"])
			ratios = append(ratios, float64(st)/float64(fd))
			t.Logf("%s, round %d, median of %d: fd %v, stream %v (%.2fx)", script, round, streamExecs, fd, st, float64(st)/float64(fd))
		}
		slices.Sort(ratios)
		t.Logf("%s: stream/fd per-round ratio median %.2fx, range %.2fx to %.2fx", script, ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1])
	}
}

// timeExec runs script in sess and returns how long the exec took.
func timeExec(t *testing.T, sess *agent.Session, script string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	begin := time.Now()
	r, err := sess.Exec(ctx, agent.ExecSpec{Command: []string{"sh", "-c", script}}, agent.IO{Stdout: io.Discard})
	took := time.Since(begin)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("%s: %v, exit %d", script, err, r.ExitCode)
	}
	return took
}

// TestStreamSavesLiveInterpreter: over the stream transport a persistent
// interpreter's pipes are the box's own, so runsc saves a box with one
// running, which over descriptors fails and ends the box
// (TestCheckpointRefusesHostPipes). Checkpoint itself still refuses the
// box, untouched, since no host session can take over a restored agent's
// stream yet (errStreamCheckpoint); the save is driven here as Checkpoint
// would drive it, to prove the half that works, and its record names the
// stream (record.Stream), which an fd Runtime's Restore refuses.
//
// runsc ends the box with the save, so the cleanup logs runsc's warnings
// ("cannot signal container in state paused", "runsc delete: panic:
// invalid state transition paused => stopped"): they are expected, as
// after any Checkpoint, and nothing is left behind (no runsc process, an
// empty runsc state directory).
func TestStreamSavesLiveInterpreter(t *testing.T) {
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	r := &Runtime{Stream: true}
	sess := startBoxOn(t, r, noNet)
	py, err := interp.New("python", sess, sess.Env())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
	defer cancel()
	if out, err := py.Run(ctx, "x = 42", nil, nil); err != nil || out.Exception != nil {
		t.Fatalf("python: %+v, %v", out, err)
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := r.Checkpoint(ctx, sess, dir, CheckpointOptions{Running: true}); !errors.Is(err, ErrCannotCheckpoint) || !strings.Contains(err.Error(), "use the descriptor transport") {
		t.Errorf("Checkpoint of a stream box = %v, want ErrCannotCheckpoint naming the way out", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused checkpoint left %s: %v", dir, err)
	}
	if out, err := py.Run(ctx, "x", nil, nil); err != nil || out.Value != "42" {
		t.Fatalf("the interpreter after the refused checkpoint: %+v, %v", out, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b := r.boxOf(sess)
	err = sess.WhilePaused(ctx, func() (bool, error) {
		if n := sess.Running(); n != 1 {
			t.Errorf("processes running in the session while paused: %d, want the interpreter", n)
		}
		return true, b.save(ctx, dir, sess.LastID(), sess.Unfinished())
	})
	if err != nil {
		t.Fatalf("saving the box with a live interpreter over the stream: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dir, checkpointImage)); err != nil || st.Size() == 0 {
		t.Errorf("the saved image: %v, %v", st, err)
	}
	if rec, err := readRecord(dir); err != nil || !rec.Stream {
		t.Errorf("the saved record = %+v, %v; want it to name the stream transport", rec, err)
	}
	if err := py.Close(); err != nil {
		t.Logf("closing the interpreter of the saved box: %v (the box ended with the save)", err)
	}
}

// TestStreamRestoreRefused: a runtime over the stream transport refuses
// a restore before reading anything, with the way out.
func TestStreamRestoreRefused(t *testing.T) {
	_, err := (&Runtime{Stream: true}).Restore(context.Background(), noNet, t.TempDir())
	if !errors.Is(err, ErrCannotCheckpoint) || !strings.Contains(err.Error(), "use the descriptor transport") {
		t.Errorf("Restore over the stream = %v, want ErrCannotCheckpoint naming the way out", err)
	}
}

// TestStreamPauseResume: a paused gVisor box over the stream keeps its
// persistent interpreter's state, and the interpreter answers again
// after the resume through the same channels.
func TestStreamPauseResume(t *testing.T) {
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	sess := startBoxOn(t, &Runtime{Stream: true}, noNet)
	py, err := interp.New("python", sess, sess.Env())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := py.Close(); err != nil {
			t.Errorf("closing the interpreter: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := py.Run(ctx, "x = 42", nil, nil); err != nil || out.Exception != nil {
		t.Fatalf("python: %+v, %v", out, err)
	}
	if err := sess.Pause(ctx); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if err := sess.Resume(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if out, err := py.Run(ctx, "x", nil, nil); err != nil || out.Value != "42" {
		t.Errorf("x after pause and resume: got %+v, %v, want 42", out, err)
	}
}
