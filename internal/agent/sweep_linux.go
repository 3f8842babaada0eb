package agent

import (
	"log/slog"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/cgroup"
)

// A cgroup teardown could not remove, although the sandbox's init has
// exited, must not be forgotten: each one holds a memory cgroup id, of
// which a host has a limited number, so a stranger who can make sessions
// end that way repeatedly would exhaust them host-wide. The sweeper
// retries them in the background, a bounded number of times, and logs
// those it gives up on.
const (
	// sweepEvery is the pause between two rounds.
	sweepEvery = 2 * time.Second
	// sweepTries bounds the rounds a group of cgroups is tried in: five
	// minutes' worth.
	sweepTries = 150
)

// sweeper removes leftover cgroups in the background. Its zero value is
// not usable; see leftovers.
type sweeper struct {
	wait func(time.Duration)
	log  func(msg string, args ...any)

	mu      sync.Mutex
	groups  []sweepGroup
	running bool
	// idle is closed (and replaced) each time the sweeper has nothing
	// left, for tests.
	idle chan struct{}
}

// sweepGroup is cgroups to remove in order (children before their
// parent), and how many rounds they have been tried in.
type sweepGroup struct {
	cgs   []cgroup.Cgroup
	tries int
}

// leftovers is the process's sweeper.
var leftovers = newSweeper(time.Sleep, slog.Error)

func newSweeper(wait func(time.Duration), log func(string, ...any)) *sweeper {
	return &sweeper{wait: wait, log: log, idle: make(chan struct{})}
}

// add queues cgs, to be removed in that order, and starts the sweeper's
// goroutine unless it runs.
func (w *sweeper) add(cgs ...cgroup.Cgroup) {
	if len(cgs) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.groups = append(w.groups, sweepGroup{cgs: cgs})
	if !w.running {
		w.running = true
		go w.run()
	}
}

// run sweeps in rounds until nothing is left.
func (w *sweeper) run() {
	for {
		w.wait(sweepEvery)
		w.mu.Lock()
		groups := w.groups
		w.groups = nil
		w.mu.Unlock()
		var left []sweepGroup
		for _, g := range groups {
			if g = w.sweep(g); len(g.cgs) > 0 {
				left = append(left, g)
			}
		}
		w.mu.Lock()
		w.groups = append(left, w.groups...)
		if len(w.groups) == 0 {
			w.running = false
			idle := w.idle
			w.idle = make(chan struct{})
			close(idle)
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
	}
}

// sweep removes what it can of g, in order, and returns the rest; after
// its last round it logs the rest and returns nothing.
func (w *sweeper) sweep(g sweepGroup) sweepGroup {
	g.tries++
	for len(g.cgs) > 0 {
		err := g.cgs[0].Delete()
		if err == nil {
			g.cgs = g.cgs[1:]
			continue
		}
		if g.tries >= sweepTries {
			paths := make([]string, len(g.cgs))
			for i, cg := range g.cgs {
				paths[i] = cg.Path()
			}
			w.log("giving up removing cgroups a session left", "cgroups", paths, "tries", g.tries, "err", err)
			return sweepGroup{}
		}
		break
	}
	return g
}

// removeInOrder removes cgs in order, stopping at the first that fails;
// it returns what is left, and why.
func removeInOrder(cgs []cgroup.Cgroup) ([]cgroup.Cgroup, error) {
	for i, cg := range cgs {
		if err := cg.Delete(); err != nil {
			return cgs[i:], err
		}
	}
	return nil, nil
}
