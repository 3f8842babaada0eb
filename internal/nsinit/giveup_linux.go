package nsinit

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// giveUpEvery rate-limits the lines saying a bounded wait gave up: the box
// decides how often that happens, and the agent's stderr reaches the host.
const giveUpEvery = time.Minute

// giveUps holds the last time each kind of give-up was written and how
// many went unwritten since, so a busy box costs one line a minute.
var giveUps = struct {
	sync.Mutex
	last    map[string]time.Time
	skipped map[string]int
}{last: map[string]time.Time{}, skipped: map[string]int{}}

// logGiveUp writes one line to stderr saying a bounded wait (what) gave up
// with left (what it left undone), at most once per giveUpEvery for each what.
func logGiveUp(what, left string) {
	giveUps.Lock()
	defer giveUps.Unlock()
	now := time.Now()
	if now.Sub(giveUps.last[what]) < giveUpEvery {
		giveUps.skipped[what]++
		return
	}
	skipped := giveUps.skipped[what]
	giveUps.last[what], giveUps.skipped[what] = now, 0
	fmt.Fprintf(os.Stderr, "warden-init: %s gave up with %s (%d more give-ups unlogged since the last line)\n", what, left, skipped)
}
