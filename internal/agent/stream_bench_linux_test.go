package agent

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/spec"
)

// BenchmarkStreamFrameSize measures what a guest's stdout costs this
// process when it sends it in 1-byte frames against 32 KiB ones, through
// a whole exec (relay, drain, capture past the limit). Both ends run in
// this process, so cpu-ns/byte is the two ends' together: an upper bound
// for the host's share. Bytes are what one exec carries.
func BenchmarkStreamFrameSize(b *testing.B) {
	const bytes = 256 << 10
	for _, size := range []int{1, 32 << 10} {
		b.Run(fmt.Sprintf("frame%dB", size), func(b *testing.B) {
			l := spec.DefaultLimits
			l.OutputBytes = 1024
			s, g := attachStream(b, l)
			chunk := make([]byte, size)
			b.SetBytes(bytes)
			b.ResetTimer()
			before := processCPU(b)
			for range b.N {
				res := execAsync(s, nil)
				req, chans := g.spawned()
				g.event(fmt.Sprintf(`{"kind":"started","id":%d,"pid":7}`, req.ID))
				for sent := 0; sent < bytes; sent += size {
					if _, err := chans[1].Write(chunk); err != nil {
						b.Fatalf("writing stdout: %v", err)
					}
				}
				chans[1].Close()
				chans[2].Close()
				g.event(fmt.Sprintf(`{"kind":"exited","id":%d,"status":{"exit_code":0}}`, req.ID))
				if o := <-res; o.err != nil {
					b.Fatalf("Exec() = %v", o.err)
				}
			}
			b.ReportMetric(float64(processCPU(b)-before)/float64(b.N*bytes), "cpu-ns/byte")
		})
	}
}

// processCPU is the CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
