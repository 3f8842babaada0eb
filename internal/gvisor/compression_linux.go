package gvisor

import (
	"fmt"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// flateBytesPerCPUSecond is how many bytes of memory one CPU of a box is
// taken to flate-compress per second at runsc's best speed: Go's
// compress/flate at BestSpeed (what gVisor's pkg/compressio uses)
// measured 239 MB/s of random bytes on one core (GOMAXPROCS=1, load
// 4.6, the security review of 2026-12-03), but a busy host gives a box
// less than its quota: at load 16 on 2 cores TestMeasureImageBytes saw
// a whole fast checkpoint of 200 MB of random bytes take 5.93 s, about
// 36 MB/s (docs/backends.md). 30 MB/s is under that, and with half of
// CheckpointWait for the compression it leaves a box twice that margin.
// It is an estimate, not a bound.
const flateBytesPerCPUSecond = 30e6

// compressionFor is the compression a box of limits lim is checkpointed
// with when c is asked, and why it is not c (""). runsc's sentry, in
// the box's cgroup, compresses the memory on the box's own CPU quota
// within CheckpointWait, and a save cut short there ends the session:
// under CompressionFast a box whose memory limit its CPUs could not
// compress, at flateBytesPerCPUSecond, in half of CheckpointWait (or
// whose memory has no limit) is written uncompressed, at copy speed.
func compressionFor(c Compression, lim spec.Limits) (Compression, string) {
	if c != CompressionFast {
		return c, ""
	}
	if lim.MemoryBytes <= 0 {
		return CompressionNone, "its memory has no limit, so its compression has no bound in time"
	}
	cpus := spec.QuotaCPUs(lim.CPUs)
	need := time.Duration(float64(lim.MemoryBytes) / (cpus * flateBytesPerCPUSecond) * float64(time.Second))
	if need > CheckpointWait/2 {
		return CompressionNone, fmt.Sprintf("compressing its %d bytes of memory limit on %g CPUs could take %s, more than half of the %s a checkpoint may take",
			lim.MemoryBytes, cpus, need.Round(time.Second), CheckpointWait)
	}
	return c, ""
}
