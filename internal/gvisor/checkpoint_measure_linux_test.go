package gvisor

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// checkpointRounds is how many of each TestMeasureCheckpoint takes.
const checkpointRounds = 6

// TestMeasureCheckpoint measures, for an idle box and one whose Python
// holds 200 MB, a checkpoint's time and bytes on disk and a restore's
// time to its first exec, against a fresh box's start to its first exec
// in the same run (medians, alternating so load falls on all alike). It
// asserts no timing (the host is shared); run it with WARDEN_MEASURE=1
// and CGO_ENABLED=0.
func TestMeasureCheckpoint(t *testing.T) {
	if os.Getenv("WARDEN_MEASURE") == "" {
		t.Skip("set WARDEN_MEASURE=1 to measure gVisor checkpoints and restores against a fresh start")
	}
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	r := &Runtime{}
	s := spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}
	took := map[string][]time.Duration{}
	bytes := map[string]int64{}
	for range checkpointRounds {
		begin := time.Now()
		sess := startBoxOn(t, r, s)
		run(t, sess, "true")
		took["fresh start to first exec"] = append(took["fresh start to first exec"], time.Since(begin))
		for _, kind := range []string{"idle", "python 200 MB"} {
			sess := startBoxOn(t, r, s)
			if kind != "idle" {
				startPython(t, sess)
			}
			dir := filepath.Join(t.TempDir(), "ckpt")
			ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
			begin := time.Now()
			err := r.Checkpoint(ctx, sess, dir, CheckpointOptions{Running: true})
			took[kind+" checkpoint"] = append(took[kind+" checkpoint"], time.Since(begin))
			cancel()
			if err != nil {
				t.Fatalf("checkpoint: %v", err)
			}
			if err := sess.Close(); err != nil {
				t.Errorf("closing the checkpointed box: %v", err)
			}
			bytes[kind] = treeBytes(t, dir)
			begin = time.Now()
			copy := restore(t, r, s, dir)
			run(t, copy, "true")
			took[kind+" restore to first exec"] = append(took[kind+" restore to first exec"], time.Since(begin))
			if err := copy.Close(); err != nil {
				t.Errorf("closing the restored box: %v", err)
			}
			if err := os.RemoveAll(dir); err != nil {
				t.Errorf("removing the checkpoint: %v", err)
			}
		}
	}
	fresh := median(took["fresh start to first exec"])
	for _, k := range []string{"fresh start to first exec", "idle checkpoint", "idle restore to first exec", "python 200 MB checkpoint", "python 200 MB restore to first exec"} {
		m := median(took[k])
		t.Logf("%-36s median %8v of %d (%.2fx a fresh start), all %v", k, m.Round(time.Millisecond), len(took[k]), float64(m)/float64(fresh), took[k])
	}
	for k, n := range bytes {
		t.Logf("%s checkpoint on disk: %d bytes (%.1f MiB)", k, n, float64(n)/(1<<20))
	}
}

// treeBytes is the size of every regular file under dir.
func treeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMeasureStreamCheckpoint measures, for a box over the stream whose
// persistent Python holds x = 42 and nothing more ("small") or 200 MB of
// random bytes as well, a pause and resume to the interpreter's next
// answer against a checkpoint, and against a restore to the adopted
// interpreter's first answer (medians, alternating so load falls on all
// alike). It asserts no timing; run it with WARDEN_MEASURE=1 and
// CGO_ENABLED=0.
func TestMeasureStreamCheckpoint(t *testing.T) {
	if os.Getenv("WARDEN_MEASURE") == "" {
		t.Skip("set WARDEN_MEASURE=1 to measure gVisor stream checkpoints and restores against a pause and resume")
	}
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	r := &Runtime{Stream: true}
	rounds := checkpointRounds
	if n, err := strconv.Atoi(os.Getenv("WARDEN_MEASURE_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	took := map[string][]time.Duration{}
	kinds := []string{"small", "200 MB"}
	for range rounds {
		for _, kind := range kinds {
			sess := startBoxOn(t, r, noNet)
			py, err := interp.New("python", sess, sess.Env())
			if err != nil {
				t.Fatal(err)
			}
			code := "x = 42"
			if kind != "small" {
				code += fmt.Sprintf("\nimport random\nbig = bytearray(random.randbytes(%d))", heldBytes)
			}
			ask(t, py, code, "")
			begin := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
			if err := sess.Pause(ctx); err != nil {
				t.Fatalf("pause: %v", err)
			}
			if err := sess.Resume(ctx); err != nil {
				t.Fatalf("resume: %v", err)
			}
			cancel()
			ask(t, py, "x", "42")
			took[kind+" pause+resume to answer"] = append(took[kind+" pause+resume to answer"], time.Since(begin))
			dir := filepath.Join(t.TempDir(), "ckpt")
			ctx, cancel = context.WithTimeout(context.Background(), CheckpointWait)
			begin = time.Now()
			err = r.Checkpoint(ctx, sess, dir, CheckpointOptions{})
			took[kind+" checkpoint"] = append(took[kind+" checkpoint"], time.Since(begin))
			cancel()
			if err != nil {
				t.Fatalf("checkpoint: %v", err)
			}
			closeAll(t, py, sess)
			begin = time.Now()
			ctx, cancel = context.WithTimeout(context.Background(), CheckpointWait)
			restored, err := r.Restore(ctx, noNet, dir)
			cancel()
			if err != nil {
				t.Fatalf("restore: %v", err)
			}
			py2 := adoptPython(t, restored)
			ask(t, py2, "x", "42")
			took[kind+" restore to answer"] = append(took[kind+" restore to answer"], time.Since(begin))
			closeAll(t, py2, restored)
			if err := os.RemoveAll(dir); err != nil {
				t.Errorf("removing the checkpoint: %v", err)
			}
		}
	}
	for _, kind := range kinds {
		base := median(took[kind+" pause+resume to answer"])
		for _, k := range []string{"pause+resume to answer", "checkpoint", "restore to answer"} {
			d := took[kind+" "+k]
			m := median(d)
			t.Logf("%-6s %-24s median %8v of %d (%.1fx pause+resume), all %v", kind, k, m.Round(time.Millisecond), len(d), float64(m)/float64(base), d)
		}
	}
}

// ask runs code in py and checks its value (none checked if want is "").
func ask(t *testing.T, py interp.Interpreter, code, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := py.Run(ctx, code, nil, nil)
	if err != nil || out.Exception != nil || (want != "" && out.Value != want) {
		t.Fatalf("python %q: %+v, %v; want %q", code, out, err, want)
	}
}

// adoptPython adopts the one live process of a restored stream session,
// its persistent Python.
func adoptPython(t *testing.T, sess *agent.Session) interp.Interpreter {
	t.Helper()
	live := sess.Live()
	if len(live) != 1 {
		t.Fatalf("live processes %v, want the interpreter", live)
	}
	for id := range live {
		py, err := interp.Adopt("python", sess, sess, id, sess.Env())
		if err != nil {
			t.Fatalf("adopting the interpreter: %v", err)
		}
		return py
	}
	return nil
}

// closeAll closes an interpreter and its session, logging what fails: a
// checkpointed box has ended already.
func closeAll(t *testing.T, py interp.Interpreter, sess *agent.Session) {
	t.Helper()
	if err := py.Close(); err != nil {
		t.Logf("closing the interpreter: %v", err)
	}
	if err := sess.Close(); err != nil {
		t.Logf("closing the session: %v", err)
	}
}
