package gvisor

import (
	"context"
	"errors"
	"io"
	"os"
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

// TestStreamRestoreLiveInterpreter: over the stream transport a
// persistent interpreter's pipes are the box's own, so a box with one
// running is checkpointed (its stream quiesced first) and restored: the
// restored agent takes a fresh stream from the new session, lists the
// interpreter as live, and the interpreter adopted from it answers x = 42
// set before the checkpoint, in each of two restored copies.
//
// runsc ends the box with the save, so the cleanup logs runsc's warnings
// ("cannot signal container in state paused", "runsc delete: panic:
// invalid state transition paused => stopped"): they are expected, as
// after any Checkpoint, and nothing is left behind (no runsc process, an
// empty runsc state directory).
func TestStreamRestoreLiveInterpreter(t *testing.T) {
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
	dir := checkpoint(t, r, sess, CheckpointOptions{})
	if err := py.Close(); err != nil {
		t.Logf("closing the interpreter of the saved box: %v (the box ended with the save)", err)
	}
	if rec, err := readRecord(dir); err != nil || !rec.Stream || rec.ResumeNonce == "" {
		t.Errorf("the saved record = %+v, %v; want it to name the stream transport and a resume nonce", rec, err)
	}
	for copyN := range 2 {
		restored := restore(t, r, noNet, dir)
		live := restored.Live()
		if len(live) != 1 {
			t.Fatalf("copy %d: live processes %v, want the interpreter", copyN, live)
		}
		var id uint64
		for id = range live {
		}
		py2, err := interp.Adopt("python", restored, restored, id, restored.Env())
		if err != nil {
			t.Fatalf("copy %d: adopting the interpreter: %v", copyN, err)
		}
		out, err := py2.Run(ctx, "x", nil, nil)
		if err != nil || out.Value != "42" || out.Started {
			t.Errorf("copy %d: x after the restore = %+v, %v; want 42 from the adopted interpreter", copyN, out, err)
		}
		if out, err := py2.Run(ctx, "print('out'); x + 1", nil, nil); err != nil || out.Value != "43" {
			t.Errorf("copy %d: x + 1 = %+v, %v; want 43", copyN, out, err)
		}
		if res, err := restored.Exec(ctx, agent.ExecSpec{Command: []string{"/bin/sh", "-c", "echo hi"}}, agent.IO{}); err != nil || res.ExitCode != 0 || res.Stdout != "hi\n" {
			t.Errorf("copy %d: an exec in the restored box = %+v, %v; want hi", copyN, res, err)
		}
		if err := py2.Close(); err != nil {
			t.Errorf("copy %d: closing the adopted interpreter: %v", copyN, err)
		}
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
