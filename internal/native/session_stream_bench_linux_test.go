package native

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/spec"
)

// BenchmarkSessionTransport measures an exec of true and one writing 64
// MiB to stdout on a session over descriptors (fd) and over the stream
// (stream), in turns within one run, so that run with -count they
// interleave on a noisy machine. host-cpu-us/op is the CPU this process
// (the host side: drains, relays, the stream) spent per exec.
func BenchmarkSessionTransport(b *testing.B) {
	l := spec.DefaultLimits
	l.OutputBytes = 80 * spec.MiB
	l.Timeout = time.Minute
	cases := []struct{ name, script string }{
		{"true", "true"},
		{"stdout64MiB", "head -c 67108864 /dev/zero"},
	}
	for _, c := range cases {
		for _, tr := range AgentTransports {
			b.Run(c.name+"/"+string(tr), func(b *testing.B) {
				s := startSessionOver(b, tr, l)
				cmd := []string{"sh", "-c", c.script}
				if c.script == "true" {
					cmd = []string{"true"}
				}
				b.ResetTimer()
				before := hostCPU(b)
				for range b.N {
					r, err := s.Exec(context.Background(), agent.ExecSpec{Command: cmd}, IO{})
					if err != nil || r.ExitCode != 0 {
						b.Fatalf("Exec(%q) = exit %d, stderr %q, %v", c.script, r.ExitCode, r.Stderr, err)
					}
				}
				b.ReportMetric(float64((hostCPU(b)-before).Microseconds())/float64(b.N), "host-cpu-us/op")
			})
		}
	}
}

// hostCPU is the CPU time this process has used.
func hostCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
