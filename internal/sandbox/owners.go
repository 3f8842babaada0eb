package sandbox

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ownerBuckets is one token bucket per owner, all with the same rate and
// burst, made on an owner's first use: what start pacing and the exec
// burst reservoirs keep per key.
type ownerBuckets struct {
	mu     sync.Mutex
	rate   rate.Limit
	burst  int
	owners map[string]*rate.Limiter
	now    func() time.Time
}

func newOwnerBuckets(r rate.Limit, burst int) *ownerBuckets {
	return &ownerBuckets{rate: r, burst: burst, owners: map[string]*rate.Limiter{}, now: time.Now}
}

// with calls f with owner's bucket and the time, under the lock, so f may
// read the bucket and take from it as one step.
func (b *ownerBuckets) with(owner string, f func(lim *rate.Limiter, now time.Time)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	lim := b.owners[owner]
	if lim == nil {
		b.prune(now)
		lim = rate.NewLimiter(b.rate, b.burst)
		b.owners[owner] = lim
	}
	f(lim, now)
}

// prune drops the buckets of owners that are full again, once there are
// many: a full bucket is what a new one would be, so the memory the map
// holds stays bounded by the owners that used theirs recently.
func (b *ownerBuckets) prune(now time.Time) {
	if len(b.owners) < maxIdlePacers {
		return
	}
	for owner, lim := range b.owners {
		if lim.TokensAt(now) >= float64(b.burst) {
			delete(b.owners, owner)
		}
	}
}
