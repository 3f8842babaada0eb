package sandbox

import (
	"sync"
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
	mu     sync.Mutex
	owners map[string]*rate.Limiter
	now    func() time.Time
}

// newExecBursts makes the reservoirs when execs are paced at pace (see
// Config.ExecPace), and nil when they are not.
func newExecBursts(pace float64) *execBursts {
	if !(pace > 0) {
		return nil
	}
	return &execBursts{owners: map[string]*rate.Limiter{}, now: time.Now}
}

// take takes up to want tokens of owner's reservoir and says how many.
func (b *execBursts) take(owner string, want int) int {
	if b == nil {
		return want
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	lim := b.owners[owner]
	if lim == nil {
		b.prune(now)
		lim = rate.NewLimiter(rate.Limit(float64(minExecBurst)/burstRefillSeconds), burstReservoirs*minExecBurst)
		b.owners[owner] = lim
	}
	n := min(want, int(lim.TokensAt(now)))
	if n <= 0 || !lim.AllowN(now, n) {
		return 0
	}
	return n
}

// prune drops full reservoirs, once there are many: a full one is what a
// new one would be.
func (b *execBursts) prune(now time.Time) {
	if len(b.owners) < maxIdlePacers {
		return
	}
	for owner, lim := range b.owners {
		if lim.TokensAt(now) >= float64(lim.Burst()) {
			delete(b.owners, owner)
		}
	}
}
