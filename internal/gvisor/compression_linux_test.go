package gvisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// compressibleBytes is what the Python of TestCheckpointCompression
// holds: one repeated byte, which flate writes in a fraction of it.
const compressibleBytes = 64 << 20

// TestCheckpointCompression: a stream box whose persistent Python holds
// x = 42 and 64 MiB of one byte, checkpointed by a Runtime asking for
// each compression, writes an image of the kind asked for (a compressed
// one a fraction of the data, with no pages files; an uncompressed one
// with them) and a record saying so, and restores with its interpreter's
// state, in the background only if uncompressed. Restore reads no
// setting of its Runtime, so that it is another's proves nothing here; a
// server restarted with the other setting is TestSnapshotCompressionSwitch
// (test/e2e). A runsc that cannot write both kinds fails it in CI.
func TestCheckpointCompression(t *testing.T) {
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	path, err := (&Runtime{}).runscPath()
	if err != nil {
		t.Fatal(err)
	}
	feat, err := runscFeatures(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if !feat.flate || !feat.uncompressed {
		testhost.SkipOrFail(t, path+" cannot choose its images' compression (install the pinned runsc: make runsc)")
	}
	for _, tc := range []struct{ write, read Compression }{
		{CompressionFast, CompressionNone},
		{CompressionNone, CompressionFast},
	} {
		t.Run(fmt.Sprintf("%s image, %s runtime", tc.write, tc.read), func(t *testing.T) {
			dir := savedCompressible(t, &Runtime{Stream: true, Compression: tc.write})
			rec, err := readRecord(dir)
			if err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Lstat(filepath.Join(dir, checkpointPagesMeta))
			size := treeBytes(t, dir)
			t.Logf("%s image: %.1f MiB on disk", tc.write, float64(size)/(1<<20))
			wantUncompressed := tc.write == CompressionNone
			switch {
			case rec.Uncompressed != wantUncompressed || (statErr == nil) != wantUncompressed:
				t.Fatalf("record uncompressed %v, pages map %v; want %v for %s", rec.Uncompressed, statErr, wantUncompressed, tc.write)
			case !wantUncompressed && size > compressibleBytes/2:
				t.Errorf("compressed image of %d bytes, want well under the %d of one byte Python held", size, compressibleBytes)
			}
			r := &Runtime{Stream: true, Compression: tc.read}
			ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
			restored, err := r.Restore(ctx, noNet, dir)
			cancel()
			if err != nil {
				t.Fatalf("restoring a %s image on a %s runtime: %v", tc.write, tc.read, err)
			}
			if background := r.boxOf(restored).loaded != nil; background != (wantUncompressed && feat.background) {
				t.Errorf("restored in the background: %v, want %v for a %s image", background, !background, tc.write)
			}
			py := adoptPython(t, restored)
			ask(t, py, "x", "42")
			ask(t, py, "len(big), big.count(b'x') == len(big)", "("+strconv.Itoa(compressibleBytes)+", True)")
			closeAll(t, py, restored)
		})
	}
}

// savedCompressible checkpoints a box of r whose persistent Python holds
// x = 42 and compressibleBytes of one byte, and returns the checkpoint.
func savedCompressible(t *testing.T, r *Runtime) string {
	t.Helper()
	sess := startBoxOn(t, r, noNet)
	py, err := interp.New("python", sess, sess.Env())
	if err != nil {
		t.Fatal(err)
	}
	ask(t, py, fmt.Sprintf("x = 42\nbig = bytearray(b'x' * %d)", compressibleBytes), "")
	dir := filepath.Join(t.TempDir(), "ckpt")
	ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
	defer cancel()
	if err := r.Checkpoint(ctx, sess, dir, CheckpointOptions{}); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	closeAll(t, py, sess)
	return dir
}
