package sandbox

import (
	"fmt"
	"time"

	"golang.org/x/time/rate"
)

// shares counts each owner's slots of a pool of n (the remoteFinds or
// remoteLists slots) against its share: an owner holds at most most of
// them, and one that holds any already takes another only while more
// than most stay free, so that however many keys are busy, a key
// holding none finds a slot left (until that many keys hold one each).
// Its fields are the Manager's, under m.mu.
type shares struct {
	n, most int
	taken   int
	by      map[string]int
}

// newShares counts the shares of n slots, most to an owner.
func newShares(n, most int) *shares {
	return &shares{n: n, most: most, by: map[string]int{}}
}

// takeShare counts one of owner's slots in sh, false when owner holds
// its share already, or holds some and taking one more would leave no
// more than sh.most free to the keys holding none.
func (m *Manager) takeShare(sh *shares, owner string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	have := sh.by[owner]
	if have >= sh.most || (have > 0 && sh.taken >= sh.n-sh.most) {
		return false
	}
	sh.by[owner]++
	sh.taken++
	return true
}

// giveShare gives back one of owner's slots counted in sh.
func (m *Manager) giveShare(sh *shares, owner string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sh.taken--
	if sh.by[owner]--; sh.by[owner] <= 0 {
		delete(sh.by, owner)
	}
}

// Pacing of the listings of a RemoteBackend's store: each is one LIST
// of the store (a consistent read, at the API server and etcd), through
// the server's one client whose rate every tenant's lookups, heartbeats
// and attaches share, so one key listing in a loop would starve them.
const (
	// listRate is the listings a second one key may make after its
	// burst.
	listRate = 1
	// listBurst is the listings one key may make at once: a dashboard's
	// or an agent's few in a row.
	listBurst = 5
)

// ListPacedError is a listing refused because its key lists faster than
// listRate: the API answers 429, with Retry-After set from Wait.
type ListPacedError struct {
	// Wait is how long until the next listing may be made.
	Wait time.Duration
}

func (e *ListPacedError) Error() string {
	return fmt.Sprintf("%v: this key lists its sessions faster than this server allows (%d a second after a burst of %d); the next listing may be made in %v",
		ErrTooMany, listRate, listBurst, (e.Wait + time.Millisecond - 1).Truncate(time.Millisecond))
}

// Unwrap makes a paced listing an ErrTooMany.
func (e *ListPacedError) Unwrap() error { return ErrTooMany }

// newListPacer is the per-key bucket of remote listings.
func newListPacer() *ownerBuckets {
	return newOwnerBuckets(listRate, listBurst)
}

// paceList takes one of owner's listings, or refuses it with a
// *ListPacedError.
func (m *Manager) paceList(owner string) error {
	var err error
	m.listPace.with(owner, func(lim *rate.Limiter, now time.Time) {
		if lim.AllowN(now, 1) {
			return
		}
		err = &ListPacedError{Wait: time.Duration((1 - lim.TokensAt(now)) / listRate * float64(time.Second))}
	})
	return err
}
