package egress

import "runtime"

// Each connection a sandbox opens to its bridge costs the host CPU that
// no cgroup charges: the init's bridge threads (outside the sandbox's
// cgroup) accept it and hand it over, and the proxy receives it, reads
// the request, decides and answers. Measured on a loaded two-core host,
// a refused CONNECT costs 0.7 ms of it in a flood (0.45 ms in warden
// serve, 0.23 ms in the init's other threads) and up to 1.5 ms when
// connections come one at a time (each wakes both sides' idle threads),
// so a sandbox at cpus 0.1 looping on refused connections spent 3.4 to
// 3.9x its own quota on the host. Connections are therefore paced per
// sandbox, by both the bridge and the proxy, in proportion to the
// sandbox's CPU quota: past the rate neither accepts, and the connections
// wait in the sandbox's own listen backlog, which costs the host nothing.
const (
	// ConnsPerCPUSecond is how many connections a sandbox may open per
	// second per core of its CPU quota: 50 at up to 1.5 ms each is at
	// most 0.075 s of host CPU per core-second.
	ConnsPerCPUSecond = 50
	// minConnBurst is the smallest burst, for the smallest quotas.
	minConnBurst = 5
)

// ConnRate is the connection rate of a sandbox with cpus cores of quota
// (0: no quota, so the host's cores).
func ConnRate(cpus float64) float64 {
	if cpus <= 0 {
		cpus = float64(runtime.NumCPU())
	}
	return ConnsPerCPUSecond * cpus
}

// ConnBurst is how many connections a sandbox paced at rate may open at
// once after a quiet spell: a second's worth, at least minConnBurst.
func ConnBurst(rate float64) float64 {
	return max(minConnBurst, rate)
}
