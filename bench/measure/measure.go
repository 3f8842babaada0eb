// Package measure holds what every benchmark program under bench/ needs to
// turn timings into figures: percentiles, milliseconds, a description of
// the machine, and short error tails, so that each program's tables are
// computed and labelled alike.
package measure

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// ErrNotBack is wrapped by AcctGroup.Enter's error when this process
// could not leave the group: it and all it starts from then on are
// charged to that group, so every later CPU figure of the group (and of
// the program's own) is wrong, and the program must stop.
var ErrNotBack = errors.New("this process is still in the cgroup")

// Pct is the p-th percentile of xs (nearest rank, p in 0..100), 0 for no
// samples.
func Pct(xs []float64, p int) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, len(s)*p/100)]
}

// MS is d in milliseconds, to the microsecond.
func MS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Tail is the last 300 bytes of a command's output, trimmed, for an error
// message that names what went wrong without pages of log.
func Tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = "..." + s[len(s)-300:]
	}
	return s
}

// Machine describes where the run happened: cores, kernel, Debian
// release, memory and cgroup version, so a table read later says what
// produced it.
func Machine() string {
	var uts [3]string
	for i, f := range []string{"/proc/sys/kernel/osrelease", "/etc/debian_version", "/proc/meminfo"} {
		b, _ := os.ReadFile(f)
		uts[i] = strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
	}
	mem := strings.Fields(uts[2])
	if len(mem) > 0 {
		mem = mem[1:]
	}
	return fmt.Sprintf("%d cores, Linux %s, Debian %s, %s, cgroup %s", runtime.NumCPU(), uts[0], uts[1],
		strings.Join(mem, " "), CgroupMode())
}

// CgroupMode is "v2" on a unified hierarchy with controllers, else "v1".
func CgroupMode() string {
	b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return "v2"
	}
	return "v1"
}
