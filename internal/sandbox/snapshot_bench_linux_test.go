package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// BenchmarkSnapshotFiles measures, on a workspace of 100 MB (10 files of
// 10 MB: "big") and on one of many small files (2000 of 3000 bytes, as a
// node_modules holds: "small", where a copy's fixed cost per file
// counts, not its bytes), each box's in a scratch tmpfs of its own mounted as the runtimes
// mount theirs: rootfs.MountScratch, with the session's --disk), a snapshot
// to the disk under the state directory, a resume from it (a fake box:
// the restore of the files is what is measured; a real box's start comes
// on top, see docs/performance.md) and a fork into 10, each as p50 and
// p99 in ms and as a ratio to a plain copy of the same files to the same
// disk in the same run (the baseline: io.Copy, no fsync). The CPU time
// the process spent on each (user and system, getrusage) is reported too,
// as p50 in ms: on a host shared with other work the wall time is mostly
// the wait for a core, the CPU time what the copy itself costs.
func BenchmarkSnapshotFiles(b *testing.B) {
	testhost.RequireRoot(b) // each box's workspace is a scratch tmpfs of its own
	b.Run("big", func(b *testing.B) { benchSnapshotFiles(b, 10, 10<<20) })
	b.Run("small", func(b *testing.B) { benchSnapshotFiles(b, 2000, 3000) })
}

// benchSnapshotFiles is BenchmarkSnapshotFiles on a workspace of count
// files of size bytes each.
func benchSnapshotFiles(b *testing.B, count, size int) {
	x := newSnapshotSetup(b)
	x.b.scratch = true
	m := NewManager(x.b, Config{Store: x.store, Snapshots: x.snaps, ExecPace: -1, StartRate: -1})
	b.Cleanup(func() { m.Close() })
	ctx := context.Background()
	o := defaultOptions()
	o.Limits.DiskBytes = 256 << 20
	in, err := m.Create(ctx, "o", o)
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, size)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	for i := range count {
		if err := os.WriteFile(filepath.Join(x.b.last(), fmt.Sprintf("f%04d", i)), chunk, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var copies, snaps, resumes, forks, copyCPU, snapCPU, resumeCPU, forkCPU []time.Duration
	var onDisk int64
	src := x.b.last()
	for b.Loop() {
		copies, copyCPU = timed(b, copies, copyCPU, func() error { return plainCopy(src, b.TempDir()) })
		snaps, snapCPU = timed(b, snaps, snapCPU, func() error { _, err := m.Snapshot(ctx, "o", in.ID, memOn); return err })
		onDisk = diskUsage(b, x.snaps.Path())
		resumes, resumeCPU = timed(b, resumes, resumeCPU, func() error { _, err := m.Resume(ctx, "o", in.ID); return err })
		src = x.b.last() // the resumed box's: the forks' boxes come after it
		var made []Info
		forks, forkCPU = timed(b, forks, forkCPU, func() error { made, err = m.Fork(ctx, "o", in.ID, 10, withMemory); return err })
		for _, f := range made {
			if err := m.Delete(ctx, "o", f.ID); err != nil {
				b.Fatal(err)
			}
		}
	}
	base := pct(copies, 50)
	for _, r := range []struct {
		name   string
		d, cpu []time.Duration
	}{{"snapshot", snaps, snapCPU}, {"resume", resumes, resumeCPU}, {"fork10", forks, forkCPU}, {"copy", copies, copyCPU}} {
		b.ReportMetric(pct(r.d, 50).Seconds()*1000, r.name+"-p50-ms")
		b.ReportMetric(pct(r.d, 99).Seconds()*1000, r.name+"-p99-ms")
		b.ReportMetric(float64(pct(r.d, 50))/float64(base), r.name+"/copy")
		b.ReportMetric(pct(r.cpu, 50).Seconds()*1000, r.name+"-cpu-p50-ms")
	}
	b.ReportMetric(float64(onDisk)/(1<<20), "snapshot-MiB-on-disk")
}

// timed runs fn and appends its wall time to wall and the process's CPU
// time meanwhile to cpu.
func timed(b *testing.B, wall, cpu []time.Duration, fn func() error) ([]time.Duration, []time.Duration) {
	b.Helper()
	c := cpuTime(b)
	t := time.Now()
	if err := fn(); err != nil {
		b.Fatal(err)
	}
	return append(wall, time.Since(t)), append(cpu, cpuTime(b)-c)
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// plainCopy copies the files of dir src into dst, the baseline.
func plainCopy(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err == nil {
			_, err = io.Copy(out, in)
			out.Close()
		}
		in.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// diskUsage is the bytes the files under dir take on disk (st_blocks).
func diskUsage(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}
