package gvisor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// noNet is the spec of the stream tests' boxes without a way out.
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
