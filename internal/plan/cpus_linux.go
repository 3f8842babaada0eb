package plan

import "slices"

// NarrowCPUs narrows this thread's CPU affinity, which every process the
// init forks inherits, to want of the CPUs it may use, so nproc and
// sched_getaffinity count the sandbox's quota rather than the host's
// cores; without a quota (0) it leaves the affinity alone. The set starts
// at the CPU the init runs on, where the scheduler's balancing put it, so
// sandboxes spread over the host's cores and the thread need not move (a
// move waits for the other CPU: ~4 ms measured on a loaded host). It is
// op LimitCPUs, which warden-exec applies the same way; the Go init calls
// it as its step.
func NarrowCPUs(want int) error {
	if want <= 0 {
		return nil
	}
	mask, err := affinity()
	if err != nil {
		return err
	}
	allowed := cpusIn(mask)
	if want >= len(allowed) {
		return nil
	}
	return setAffinity(narrow(allowed, currentCPU(), want, len(mask)))
}

// cpusIn lists the CPUs set in mask, a kernel CPU mask of 64-bit words.
func cpusIn(mask []uint64) []int {
	var cpus []int
	for w, bits := range mask {
		for b := range 64 {
			if bits&(1<<b) != 0 {
				cpus = append(cpus, w*64+b)
			}
		}
	}
	return cpus
}

// narrow is a mask of words words holding want of the allowed CPUs,
// starting at cpu (the first allowed one if cpu is not allowed) and
// wrapping around.
func narrow(allowed []int, cpu, want, words int) []uint64 {
	mask := make([]uint64, words)
	start := max(0, slices.Index(allowed, cpu))
	for i := range min(want, len(allowed)) {
		c := allowed[(start+i)%len(allowed)]
		mask[c/64] |= 1 << (c % 64)
	}
	return mask
}
