package gvisor

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

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
