package native

import (
	"bytes"
	"io"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// BenchmarkRemoteFiles measures the file API through the agent over the
// stream (remote, the path a Pod's files take) against the host's own
// Dir on the same box's workspace (host), in turns within each run:
// a Stat, an upload and a download of 10 MB. Compare the two as ratios
// within one run (-count interleaves whole runs).
func BenchmarkRemoteFiles(b *testing.B) {
	const size = 10 << 20
	_, remote, host := streamFiles(b, spec.DefaultLimits, workspace.Limits{})
	content := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	if _, err := host.Write("ten", bytes.NewReader(content), 0); err != nil {
		b.Fatalf("Write() = %v", err)
	}
	ops := []struct {
		name string
		op   func(b *testing.B, f workspace.Files)
	}{
		{"stat", func(b *testing.B, f workspace.Files) {
			if _, err := f.Stat("ten"); err != nil {
				b.Fatalf("Stat() = %v", err)
			}
		}},
		{"upload10MB", func(b *testing.B, f workspace.Files) {
			b.SetBytes(size)
			if _, err := f.Write("up", bytes.NewReader(content), 0); err != nil {
				b.Fatalf("Write() = %v", err)
			}
		}},
		{"download10MB", func(b *testing.B, f workspace.Files) {
			b.SetBytes(size)
			rc, e, err := f.Read("ten")
			if err != nil {
				b.Fatalf("Read() = %v", err)
			}
			n, err := io.CopyN(io.Discard, rc, e.Size)
			if cerr := rc.Close(); err == nil {
				err = cerr
			}
			if err != nil || n != size {
				b.Fatalf("reading = %d bytes, %v", n, err)
			}
		}},
	}
	for _, o := range ops {
		for _, side := range []struct {
			name string
			f    workspace.Files
		}{{"host", host}, {"remote", remote}} {
			b.Run(o.name+"/"+side.name, func(b *testing.B) {
				before := hostCPU(b)
				for range b.N {
					o.op(b, side.f)
				}
				b.ReportMetric(float64((hostCPU(b)-before).Microseconds())/float64(b.N), "host-cpu-us/op")
			})
		}
	}
}
