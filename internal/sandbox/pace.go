package sandbox

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Every exec costs the host CPU outside the sandbox's cgroup, where no
// limit charges it: the request, the exec's cgroup and pipes, the agent
// protocol, the result (2.4 to 3.3 ms of warden serve's CPU per `true`,
// measured on a loaded two-core host). A client sending tiny execs as fast as it can would spend
// several times its session's CPU quota on the host. So exec starts are
// paced per session, in proportion to the quota, so the host spends at
// most about a tenth of it on them; a burst lets an agent that works in
// short steps never notice.
const (
	// execsPerCPUSecond is how many execs a session may start per second
	// per core of its CPU quota: 30 at ~3.3 ms each is 0.1 s of host CPU
	// per core-second.
	execsPerCPUSecond = 30
	// execBurst is how many execs a session may start at once, with no
	// wait, after it has been quiet.
	execBurst = 20
)

// pacer is a token bucket: tokens come at rate per second up to burst,
// and each exec start takes one, waiting for it when there is none.
type pacer struct {
	rate, burst float64
	now         func() time.Time

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// newExecPacer paces the execs of a session with cpus cores of quota
// (0: no quota, so the host's cores).
func newExecPacer(cpus float64) *pacer {
	if cpus <= 0 {
		cpus = float64(runtime.NumCPU())
	}
	return newPacer(execsPerCPUSecond*cpus, execBurst, time.Now)
}

func newPacer(rate, burst float64, now func() time.Time) *pacer {
	return &pacer{rate: rate, burst: burst, now: now, tokens: burst, last: now()}
}

// reserve takes a token and says how long to wait before using it.
func (p *pacer) reserve() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.tokens = min(p.burst, p.tokens+now.Sub(p.last).Seconds()*p.rate)
	p.last = now
	p.tokens--
	if p.tokens >= 0 {
		return 0
	}
	return time.Duration(-p.tokens / p.rate * float64(time.Second))
}

// cancel gives back a token reserve took, for a start that never came.
func (p *pacer) cancel() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokens = min(p.burst, p.tokens+1)
}

// wait takes a token, waiting for it as long as ctx allows. The wait is
// short: one exec at a time waits per session (the others are busy), so
// it is at most one token's time, 1/rate.
func (p *pacer) wait(ctx context.Context) error {
	d := p.reserve()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		p.cancel()
		return fmt.Errorf("waiting %v for the session's exec pace (%g per second): %w", d.Round(time.Millisecond), p.rate, ctx.Err())
	}
}
