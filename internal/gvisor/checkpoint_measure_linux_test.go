package gvisor

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// TestMeasureBackgroundRestore measures issue 22's target: a stream
// box whose persistent Python holds 200 MB, checkpointed and restored to
// the adopted interpreter's first answer, with Debian's runsc (a
// compressed image read whole), a newer runsc (WARDEN_NEW_RUNSC, default
// /opt/runsc-new/runsc) without restore --background (an uncompressed
// image read whole) and with it (pages loaded after the restore
// returned): each round runs the three in turn, so load falls on all
// alike; p50 and p99 (nearest rank) of the rounds, and the image's bytes
// on disk. It asserts no timing; run it with WARDEN_MEASURE=1,
// CGO_ENABLED=0 and WARDEN_MEASURE_ROUNDS (default 6).
func TestMeasureBackgroundRestore(t *testing.T) {
	if os.Getenv("WARDEN_MEASURE") == "" {
		t.Skip("set WARDEN_MEASURE=1 to measure restores with and without runsc's background page loading")
	}
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	newRunsc := os.Getenv("WARDEN_NEW_RUNSC")
	if newRunsc == "" {
		newRunsc = "/opt/runsc-new/runsc"
	}
	if f, err := runscFeatures(context.Background(), newRunsc); err != nil || !f.background {
		t.Skipf("%s cannot restore in the background (%+v, %v): set WARDEN_NEW_RUNSC", newRunsc, f, err)
	}
	oldRunsc, err := exec.LookPath("runsc")
	if err != nil {
		t.Fatal(err)
	}
	rounds := checkpointRounds
	if n, err := strconv.Atoi(os.Getenv("WARDEN_MEASURE_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	variants := []struct{ name, runsc string }{
		{"old runsc", oldRunsc},
		{"new, no background", foregroundRunsc(t, newRunsc)},
		{"new, background", newRunsc},
	}
	took := map[string][]time.Duration{}
	bytes := map[string]int64{}
	for range rounds {
		for _, v := range variants {
			r := &Runtime{Stream: true, Runsc: v.runsc}
			sess := startBoxOn(t, r, noNet)
			py, err := interp.New("python", sess, sess.Env())
			if err != nil {
				t.Fatal(err)
			}
			ask(t, py, fmt.Sprintf("x = 42\nimport random\nbig = bytearray(random.randbytes(%d))", heldBytes), "")
			dir := filepath.Join(t.TempDir(), "ckpt")
			ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
			begin := time.Now()
			err = r.Checkpoint(ctx, sess, dir, CheckpointOptions{})
			took[v.name+" checkpoint"] = append(took[v.name+" checkpoint"], time.Since(begin))
			cancel()
			if err != nil {
				t.Fatalf("%s: checkpoint: %v", v.name, err)
			}
			closeAll(t, py, sess)
			bytes[v.name] = treeBytes(t, dir)
			begin = time.Now()
			ctx, cancel = context.WithTimeout(context.Background(), CheckpointWait)
			restored, err := r.Restore(ctx, noNet, dir)
			took[v.name+" Restore returns"] = append(took[v.name+" Restore returns"], time.Since(begin))
			cancel()
			if err != nil {
				t.Fatalf("%s: restore: %v", v.name, err)
			}
			py2 := adoptPython(t, restored)
			ask(t, py2, "x", "42")
			took[v.name+" restore to answer"] = append(took[v.name+" restore to answer"], time.Since(begin))
			ask(t, py2, "len(big)", strconv.Itoa(heldBytes))
			closeAll(t, py2, restored)
			if err := os.RemoveAll(dir); err != nil {
				t.Errorf("removing the checkpoint: %v", err)
			}
		}
	}
	for _, v := range variants {
		for _, k := range []string{"checkpoint", "Restore returns", "restore to answer"} {
			d := took[v.name+" "+k]
			t.Logf("%-18s %-17s p50 %8v p99 %8v of %d, all %v", v.name, k, percentile(d, 50).Round(time.Millisecond), percentile(d, 99).Round(time.Millisecond), len(d), d)
		}
		t.Logf("%-18s on disk %d bytes (%.1f MiB)", v.name, bytes[v.name], float64(bytes[v.name])/(1<<20))
	}
}

// percentile is the p-th percentile of d by nearest rank.
func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[max(0, (p*len(s)+99)/100-1)]
}

// foregroundRunsc is a runsc that runs real without restore
// --background: its restores load every page before they return.
func foregroundRunsc(t *testing.T, real string) string {
	return strippingRunsc(t, real, "--background")
}

// strippingRunsc is a runsc that runs real with flag left out of its
// arguments.
func strippingRunsc(t *testing.T, real, flag string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runsc")
	script := "#!/bin/sh\nfor a; do shift; [ \"$a\" = " + flag + " ] || set -- \"$@\" \"$a\"; done\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMeasureImageBytes measures what a checkpoint of a Python holding
// 200 MB costs on disk, which a session's snapshot is charged, and its
// checkpoint's and restore's (to the adopted interpreter's first answer)
// time: random bytes, zeros it wrote and one repeated byte, with
// Debian's runsc (a compressed image), a newer runsc (WARDEN_NEW_RUNSC)
// uncompressed keeping its zero pages, uncompressed leaving them out
// (CompressionNone, Warden's default) and flate-compressed
// (CompressionFast); each image restored and Python's data compared by
// CRC. Each round runs every variant in turn, so load falls on all
// alike; medians of WARDEN_MEASURE_ROUNDS rounds (default 1). It asserts
// no timing; run it with WARDEN_MEASURE=1 and CGO_ENABLED=0.
func TestMeasureImageBytes(t *testing.T) {
	if os.Getenv("WARDEN_MEASURE") == "" {
		t.Skip("set WARDEN_MEASURE=1 to measure checkpoint images on disk")
	}
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	newRunsc := os.Getenv("WARDEN_NEW_RUNSC")
	if newRunsc == "" {
		newRunsc = "/opt/runsc-new/runsc"
	}
	if f, err := runscFeatures(context.Background(), newRunsc); err != nil || !f.zeroPages || !f.flate {
		t.Skipf("%s cannot leave zero pages out or compress (%+v, %v): set WARDEN_NEW_RUNSC", newRunsc, f, err)
	}
	oldRunsc, err := exec.LookPath("runsc")
	if err != nil {
		t.Fatal(err)
	}
	rounds := 1
	if n, err := strconv.Atoi(os.Getenv("WARDEN_MEASURE_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	contents := []struct{ name, code string }{
		{"random", fmt.Sprintf("bytearray(random.randbytes(%d))", heldBytes)},
		{"zeros", fmt.Sprintf("bytearray(bytes(1) * %d)", heldBytes)},
		{"one byte", fmt.Sprintf("bytearray(b'x' * %d)", heldBytes)},
	}
	variants := []imageVariant{
		{"old runsc", oldRunsc, ""},
		{"new, zero pages kept", strippingRunsc(t, newRunsc, "--exclude-committed-zero-pages"), CompressionNone},
		{"new, none", newRunsc, CompressionNone},
		{"new, fast", newRunsc, CompressionFast},
	}
	took := map[string][]time.Duration{}
	bytes := map[string]int64{}
	for range rounds {
		for _, c := range contents {
			for _, v := range variants {
				key := c.name + ", " + v.name
				ckpt, rest, n := measureImage(t, v, c.code)
				took[key+" checkpoint"] = append(took[key+" checkpoint"], ckpt)
				took[key+" restore"] = append(took[key+" restore"], rest)
				bytes[key] = n
			}
		}
	}
	for _, c := range contents {
		for _, v := range variants {
			key := c.name + ", " + v.name
			t.Logf("%-8s %-22s on disk %6.1f MiB, checkpoint median %7v, restore to answer median %7v (of %d; all %v, %v)", c.name, v.name,
				float64(bytes[key])/(1<<20), median(took[key+" checkpoint"]).Round(time.Millisecond), median(took[key+" restore"]).Round(time.Millisecond),
				rounds, took[key+" checkpoint"], took[key+" restore"])
		}
	}
}

// imageVariant is a runsc and the compression a Runtime asks it for.
type imageVariant struct {
	name        string
	runsc       string
	compression Compression
}

// measureImage checkpoints a stream box of v whose Python holds what
// code makes, restores it and checks Python's data by CRC: it returns
// the checkpoint's time, the restore's to the adopted interpreter's first
// answer, and the image's bytes on disk.
func measureImage(t *testing.T, v imageVariant, code string) (ckpt, rest time.Duration, n int64) {
	t.Helper()
	r := &Runtime{Stream: true, Runsc: v.runsc, Compression: v.compression}
	sess := startBoxOn(t, r, noNet)
	py, err := interp.New("python", sess, sess.Env())
	if err != nil {
		t.Fatal(err)
	}
	ask(t, py, "import random, zlib\nbig = "+code, "")
	crc := askValue(t, py, "zlib.crc32(big)")
	dir := filepath.Join(t.TempDir(), "ckpt")
	ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
	begin := time.Now()
	err = r.Checkpoint(ctx, sess, dir, CheckpointOptions{})
	ckpt = time.Since(begin)
	cancel()
	if err != nil {
		t.Fatalf("%s: checkpoint: %v", v.name, err)
	}
	closeAll(t, py, sess)
	n = treeBytes(t, dir)
	ctx, cancel = context.WithTimeout(context.Background(), CheckpointWait)
	defer cancel()
	begin = time.Now()
	restored, err := r.Restore(ctx, noNet, dir)
	if err != nil {
		t.Fatalf("%s: restore: %v", v.name, err)
	}
	py2 := adoptPython(t, restored)
	ask(t, py2, "1", "1")
	rest = time.Since(begin)
	ask(t, py2, "zlib.crc32(big)", crc)
	closeAll(t, py2, restored)
	if err := os.RemoveAll(dir); err != nil {
		t.Errorf("removing the checkpoint: %v", err)
	}
	return ckpt, rest, n
}

// askValue is the value of code run in py.
func askValue(t *testing.T, py interp.Interpreter, code string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := py.Run(ctx, code, nil, nil)
	if err != nil || out.Exception != nil || out.Value == "" {
		t.Fatalf("python %q: %+v, %v; want a value", code, out, err)
	}
	return out.Value
}
