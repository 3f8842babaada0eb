package docker

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// nextCPU is where the next box's CPUs start, as an index into Warden's
// CPUs: each box advances it by the CPUs it takes, so a server's boxes
// take turns over the host's cores rather than piling onto the CPU its
// thread happens to run on. It starts at a random place so that separate
// `warden run` processes spread too.
var nextCPU = newCPUCounter()

func newCPUCounter() *atomic.Uint64 {
	var c atomic.Uint64
	c.Store(rand.Uint64N(1 << 32))
	return &c
}

// boxCPUs are the CPUs a box shown want CPUs (rootfs.View.CPUs) is
// confined to by its cpuset: all of Warden's own (its affinity, which a
// native box inherits) for no quota (0) or a quota not fewer than those,
// else want of them placed round-robin (place). Its view counts these,
// so nproc, /proc/cpuinfo and /proc/stat agree with what it may run on.
func boxCPUs(want int) ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var allowed []int
	for c := 0; len(allowed) < set.Count(); c++ {
		if set.IsSet(c) {
			allowed = append(allowed, c)
		}
	}
	if len(allowed) == 0 {
		return nil, fmt.Errorf("sched_getaffinity: no CPU allowed")
	}
	return place(allowed, want, nextCPU), nil
}

// place is want of the allowed CPUs, consecutive (wrapping around) from
// the index next holds, which it advances by want; every allowed CPU when
// want is 0 or not fewer than those.
func place(allowed []int, want int, next *atomic.Uint64) []int {
	if want <= 0 || want >= len(allowed) {
		return allowed
	}
	start := next.Add(uint64(want)) - uint64(want)
	cpus := make([]int, want)
	for i := range cpus {
		cpus[i] = allowed[(start+uint64(i))%uint64(len(allowed))]
	}
	return cpus
}

// cpuList is cpus as a cpuset list ("0,3").
func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// nanoCPUs is the container's NanoCPUs for a quota of want CPUs in a
// cpuset of have: never more than have, which the cpuset bounds anyway,
// since the engine refuses a quota above the host's core count (--cpus
// 64 on a 2-core host); have 0 (no cpuset known) clamps nothing.
func nanoCPUs(want float64, have int) int64 {
	if have > 0 && want > float64(have) {
		want = float64(have)
	}
	return int64(want * 1e9)
}
