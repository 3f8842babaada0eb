package sandbox

import (
	"runtime"

	"github.com/warden-sandbox/warden/internal/pace"
)

// Every exec costs the host CPU outside the sandbox's cgroup, where no
// limit charges it: the request, the exec's cgroup and pipes, the agent
// protocol, the result (2.4 to 3.3 ms of warden serve's CPU per `true`,
// measured on a loaded two-core host). A client sending tiny execs as
// fast as it can would spend several times its session's CPU quota on
// the host. So exec starts are paced per session, in proportion to the
// quota, so the host spends at most about a tenth of it on them; a burst
// lets an agent that works in short steps never notice.
const (
	// execsPerCPUSecond is how many execs a session may start per second
	// per core of its CPU quota: 30 at ~3.3 ms each is 0.1 s of host CPU
	// per core-second.
	execsPerCPUSecond = 30
	// execBurst is how many execs a session may start at once, with no
	// wait, after it has been quiet.
	execBurst = 20
)

// newExecPacer paces the execs of a session with cpus cores of quota
// (0: no quota, so the host's cores). One exec at a time waits per
// session (the others are busy), so a wait is at most one token's time.
func newExecPacer(cpus float64) *pace.Bucket {
	if cpus <= 0 {
		cpus = float64(runtime.NumCPU())
	}
	return pace.New(execsPerCPUSecond*cpus, execBurst)
}
