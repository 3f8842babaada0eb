package sandbox

import (
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"
)

// Starting a sandbox costs warden serve and its spawner host CPU that no
// cgroup charges, far more than an exec (measured with bench/tenants;
// the figures are in docs/api.md, Tenants' shares, Starts, the one
// place they are kept). A client starting sandboxes back to back kept
// half a core busy outside any cgroup, uncharged, whatever its share of
// sessions. So starts (Create and Run, the one path of the API, /mcp
// and warden mcp) are paced per owner by a token bucket:
// DefaultStartRate starts a second after a burst of StartBurstSeconds of
// the rate and at least MinStartBurst, which interactive use, an agent's
// tool calls and a benchmark of a hundred starts never reach. A start
// past the rate is refused at once (never queued), with the wait in a
// *StartPacedError. Pacing bounds starts, not requests: a client that
// asks again at once costs the host each refusal's request.
const (
	// DefaultStartRate is the starts a second each owner may make after
	// its burst when Config.StartRate is zero: past the burst, a key's
	// starts cost the host at most the rate times the measured cost of
	// a start (docs/api.md, Starts: about a tenth of a core).
	DefaultStartRate = 2
	// MaxStartRate bounds Config.StartRate.
	MaxStartRate = 10000
	// MinStartRate is the lowest Config.StartRate that paces (one start
	// a minute): a rate lower still would make a key wait hours for its
	// next start after a burst, which no operator means.
	MinStartRate = 1.0 / 60
	// StartBurstSeconds is the burst, in seconds of the rate, that an
	// owner may start before the rate holds, as an agent's bursts of
	// tool calls come in bunches.
	StartBurstSeconds = 10
	// MinStartBurst is the least burst, so a low rate still lets a
	// benchmark or a batch of a hundred starts through at once.
	MinStartBurst = 100
	// maxIdlePacers is how many owners' buckets are kept before those
	// that are full again (which hold nothing) are dropped.
	maxIdlePacers = 1024
)

// StartPacedError is a start refused because its owner has started
// sandboxes faster than the start rate allows. It is an ErrTooMany: the
// API answers 429, with Retry-After set from Wait.
type StartPacedError struct {
	// Rate is the starts a second allowed after Burst.
	Rate  float64
	Burst int
	// Wait is how long until the next start may be made.
	Wait time.Duration
}

func (e *StartPacedError) Error() string {
	return fmt.Sprintf("%v: this key starts sessions and runs faster than this server allows (%g a second after a burst of %d); "+
		"the next may start in %v: reuse a session for many execs, or have the operator raise --start-rate",
		ErrTooMany, e.Rate, e.Burst, (e.Wait + time.Millisecond - 1).Truncate(time.Millisecond))
}

// Unwrap makes a paced start an ErrTooMany.
func (e *StartPacedError) Unwrap() error { return ErrTooMany }

// startPacer paces each owner's starts; nil paces nothing.
type startPacer struct {
	rate    float64
	burst   int
	buckets *ownerBuckets
}

// newStartPacer paces starts at r a second per owner (see
// Config.StartRate; negative: not paced).
func newStartPacer(r float64) *startPacer {
	if !(r > 0) || math.IsInf(r, 0) {
		return nil
	}
	burst := max(MinStartBurst, int(math.Ceil(StartBurstSeconds*r)))
	return &startPacer{rate: r, burst: burst, buckets: newOwnerBuckets(rate.Limit(r), burst)}
}

// take takes one start of owner's, or refuses it with a
// *StartPacedError saying how long to wait. The Manager calls it last,
// under its lock, once nothing else can refuse the start: a token once
// taken is never given back.
func (p *startPacer) take(owner string) error {
	if p == nil {
		return nil
	}
	var err error
	p.buckets.with(owner, func(lim *rate.Limiter, now time.Time) {
		if lim.AllowN(now, 1) {
			return
		}
		wait := time.Duration((1 - lim.TokensAt(now)) / p.rate * float64(time.Second))
		err = &StartPacedError{Rate: p.rate, Burst: p.burst, Wait: wait}
	})
	return err
}

// validStartRate checks Config.StartRate: negative (off), zero (the
// default) or from MinStartRate to MaxStartRate.
func validStartRate(r float64) error {
	if math.IsNaN(r) || r > MaxStartRate || (r > 0 && r < MinStartRate) {
		return fmt.Errorf("--start-rate %g is out of range: use 0 (no pacing) or %.4g (one a minute) up to %d, the sessions and runs one key may start a second",
			r, float64(MinStartRate), MaxStartRate)
	}
	return nil
}
