package egress

import (
	"context"
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/warden-sandbox/warden/internal/spec"
)

// Each connection a sandbox opens to its bridge costs the host CPU that
// no cgroup charges: the init's bridge threads (outside the sandbox's
// cgroup) accept it and hand it over, and the proxy receives it, reads
// the request, decides and answers. A refused CONNECT costs 0.7 ms of it
// in a flood through warden serve, but more when connections come one at
// a time, as pacing makes them come, since each wakes both sides' idle
// threads: measured with `warden run` on a loaded two-core host (its own
// CPU and its init's outside the cgroup), 1.5 to 2.9 ms each at 50 a
// second, 2.2 ms at 5 and 3.6 ms at 1.5. Unpaced, a sandbox at cpus 0.1
// looping on refused connections spent 3.4 to 3.9x its own quota on the
// host. Connections are therefore paced per sandbox, by both the bridge
// and the proxy, in proportion to the sandbox's CPU quota: past the pace
// neither hands a connection on, and the connections wait in the
// sandbox's own listen backlog, which costs the host nothing.
const (
	// connsPerCPUSecond is how many connections a sandbox may open per
	// second per core of its CPU quota: 10 at up to 4 ms each is at most
	// 0.04 s of host CPU per core-second, leaving room at small quotas
	// for the run's own start and stop (0.03x of a 10 s run at cpus 0.1).
	connsPerCPUSecond = 10
	// minConnBurst is the smallest burst, for the smallest quotas.
	minConnBurst = 5
)

// Pace is how fast a sandbox may open connections: Rate a second, after
// a burst of Burst. The zero Pace paces nothing.
type Pace struct {
	Rate  float64
	Burst int
}

// ConnPace is the pace of a sandbox with cpus cores of quota
// (spec.QuotaCPUs): connsPerCPUSecond a second per core, after a burst of
// a second's worth, at least minConnBurst. The bridge and the proxy both
// pace by it.
func ConnPace(cpus float64) Pace {
	r := connsPerCPUSecond * spec.QuotaCPUs(cpus)
	return Pace{Rate: r, Burst: max(minConnBurst, int(math.Ceil(r)))}
}

// Limiter is p as a token bucket, or nil (no pacing) unless its rate is
// positive and finite.
func (p Pace) Limiter() *rate.Limiter {
	if !(p.Rate > 0) || math.IsInf(p.Rate, 0) {
		return nil
	}
	return rate.NewLimiter(rate.Limit(p.Rate), max(p.Burst, 1))
}

// turn takes a token of lim and says how long to wait for it (0 with no
// pacing), and whether the burst is spent: less than a token is left, so
// the next connection waits its turn.
func turn(lim *rate.Limiter) (wait time.Duration, spent bool) {
	if lim == nil {
		return 0, false
	}
	now := time.Now()
	wait = lim.ReserveN(now, 1).DelayFrom(now)
	return wait, lim.TokensAt(now) < 1
}

// paceNote is the network event recorded when a sandbox's connections
// reach their pace: past it a connection waits unanswered, and a client
// whose timeout is shorter than its turn sees only a timeout, so the log
// says why and what to do.
func paceNote(lim *rate.Limiter) spec.NetworkEvent {
	return spec.NetworkEvent{
		Time: time.Now().UTC().Format(time.RFC3339Nano),
		Reason: fmt.Sprintf("connection pace reached: this sandbox may open connections at %g a second (%d a second per core of its cpus) "+
			"after a burst of %d; later ones wait their turn unanswered, and a client's timeout may end them first: "+
			"open fewer connections at once (reuse them), or ask for more cpus", float64(lim.Limit()), connsPerCPUSecond, lim.Burst()),
	}
}

// sleep waits d or until ctx ends, and says which (ctx's error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
