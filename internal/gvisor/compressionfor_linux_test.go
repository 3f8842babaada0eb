package gvisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestCompressionFor: under fast a box is compressed only where its CPUs
// could compress its memory limit, at flateBytesPerCPUSecond, in half of
// CheckpointWait; a larger or slower box, or one with no memory limit,
// is written uncompressed and says why; none is never changed.
func TestCompressionFor(t *testing.T) {
	tests := []struct {
		name    string
		c       Compression
		lim     spec.Limits
		want    Compression
		wantWhy string
	}{
		{"none", CompressionNone, spec.Limits{MemoryBytes: 64 * spec.GiB, CPUs: 0.01}, CompressionNone, ""},
		{"default", "", spec.Limits{CPUs: 1}, "", ""},
		{"default box", CompressionFast, spec.DefaultLimits, CompressionFast, ""},
		{"1.5 GB on 1 CPU (50 s)", CompressionFast, spec.Limits{MemoryBytes: 1.5e9, CPUs: 1}, CompressionFast, ""},
		{"2.1 GB on 1 CPU (70 s)", CompressionFast, spec.Limits{MemoryBytes: 2.1e9, CPUs: 1}, CompressionNone, "more than half of the 2m0s"},
		{"512 MiB on 0.01 CPUs", CompressionFast, spec.Limits{MemoryBytes: 512 * spec.MiB, CPUs: spec.MinCPUs}, CompressionNone, "on 0.01 CPUs"},
		{"15 MB on 0.01 CPUs (50 s)", CompressionFast, spec.Limits{MemoryBytes: 15e6, CPUs: spec.MinCPUs}, CompressionFast, ""},
		{"no memory limit", CompressionFast, spec.Limits{CPUs: 1}, CompressionNone, "no limit"},
	}
	for _, tt := range tests {
		got, why := compressionFor(tt.c, tt.lim)
		if got != tt.want || (tt.wantWhy == "") != (why == "") || !strings.Contains(why, tt.wantWhy) {
			t.Errorf("%s: compressionFor(%q, %+v) = %q, %q; want %q, saying %q", tt.name, tt.c, tt.lim, got, why, tt.want, tt.wantWhy)
		}
	}
}

// TestSettleRecord: after runsc's save the record says the kind of image
// runsc wrote, told by its pages map as runsc tells it, whatever it was
// asked, so checkImage takes it; pages that are not there with their map
// fail the save.
func TestSettleRecord(t *testing.T) {
	tests := []struct {
		name             string
		files            map[string]string
		asked            bool
		wantUncompressed bool
		wantPages        int64
		wantErr          string
	}{
		{"compressed as asked", map[string]string{checkpointImage: "i"}, false, false, 0, ""},
		{"uncompressed as asked", map[string]string{checkpointImage: "i", checkpointPagesMeta: "m", checkpointPages: "pppp"}, true, true, 4, ""},
		{"uncompressed, asked compressed", map[string]string{checkpointImage: "i", checkpointPagesMeta: "m", checkpointPages: "pp"}, false, true, 2, ""},
		{"compressed, asked uncompressed", map[string]string{checkpointImage: "i"}, true, false, 0, ""},
		{"a map without pages", map[string]string{checkpointImage: "i", checkpointPagesMeta: "m"}, true, false, 0, "runsc wrote no pages.img"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			rec := record{Format: checkpointFormat, Uncompressed: tt.asked}
			if err := writeRecord(dir, rec); err != nil {
				t.Fatal(err)
			}
			err := settleRecord(dir, &rec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("settleRecord() = %v, want an error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("settleRecord() = %v", err)
			}
			got, err := readRecord(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got.Uncompressed != tt.wantUncompressed || got.PagesBytes != tt.wantPages || rec.Uncompressed != got.Uncompressed {
				t.Errorf("record on disk uncompressed %v, pages %d (in memory %v); want %v, %d", got.Uncompressed, got.PagesBytes, rec.Uncompressed, tt.wantUncompressed, tt.wantPages)
			}
			if err := checkImage(dir, got); err != nil {
				t.Errorf("checkImage(settled record) = %v, want nil", err)
			}
		})
	}
}
