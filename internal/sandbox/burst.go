package sandbox

import (
	"time"

	"golang.org/x/time/rate"
)

// A session's exec pacer starts with a burst of host CPU (at least
// minExecBurst, 806 ms), so that interactive use never waits. Were every
// new session given a full one, a key could create a session, spend its
// burst on tiny execs, delete it and start again, renewing uncharged host
// CPU as fast as start pacing lets it create sessions (2 a second by
// default: some 0.7 of a core in command execs). So the bursts of an
// owner's new sessions come from one reservoir per owner: it holds
// burstReservoirs minimum bursts, enough for an agent that opens a few
// sessions at once, and gives back one every burstRefillSeconds. A
// session created while the reservoir is low starts with what is left,
// and its first execs wait for the session's own rate (a command 100 ms
// at one core), as after any spent burst.
const (
	burstReservoirs    = 4
	burstRefillSeconds = 30
)

// execBursts is the reservoir of each owner's exec bursts; nil gives
// every session its whole burst.
type execBursts struct {
	buckets *ownerBuckets
}

// newExecBursts makes the reservoirs when execs are paced at pace (see
// Config.ExecPace), and nil when they are not.
func newExecBursts(pace float64) *execBursts {
	if !(pace > 0) {
		return nil
	}
	return &execBursts{newOwnerBuckets(rate.Limit(float64(minExecBurst)/burstRefillSeconds), burstReservoirs*minExecBurst)}
}

// take takes up to want tokens of owner's reservoir and says how many.
func (b *execBursts) take(owner string, want int) int {
	if b == nil {
		return want
	}
	n := 0
	b.buckets.with(owner, func(lim *rate.Limiter, now time.Time) {
		if k := min(want, int(lim.TokensAt(now))); k > 0 && lim.AllowN(now, k) {
			n = k
		}
	})
	return n
}
