//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/warden-sandbox/warden/bench/measure"
)

// apiPool is the --pool of the API contenders: enough for the rounds of a
// cold-start table, where the pool refills between runs; a burst of
// concurrent runs drains it, and the rest are built on demand.
const apiPool = 8

// apiName is the name of the API contender with a pool of pool (0: none).
func apiName(pool int) string {
	if pool > 0 {
		return fmt.Sprintf("warden native API (pool %d)", pool)
	}
	return "warden native API"
}

// oneShot runs prog through POST /v1/run and returns the request's wall
// time in ms, failing on anything but exit 0.
func (s *server) oneShot(prog []string) (float64, error) { return s.OneShot(prog) }

// apiContender runs programs through a warden serve's one-shot API, with
// pool sandboxes built ahead (or none): what an agent that calls Warden
// over HTTP waits for, without a CLI process per run. The server runs in
// a cpuacct cgroup of its own, so the CPU of the server, its spawner and
// its sandboxes is read whole (contender.usage); without one (cgroup v2,
// no cpuacct) the contender runs with its CPU not measured.
func apiContender(warden string, pool int) *contender {
	c := &contender{name: apiName(pool)}
	var srv *server
	started := false
	start := func() error {
		started = true
		var err error
		srv, err = startServer(warden, "native", "--pool", fmt.Sprint(pool))
		return err
	}
	g, err := measure.NewAcctGroup(fmt.Sprintf("warden-harness-%d-pool%d-%d", os.Getpid(), pool, time.Now().UnixNano()))
	if err == nil {
		err = g.Enter(start)
	}
	if !started {
		c.cpuNote = fmt.Sprintf("no cpuacct cgroup for the server: %v", err)
		err = start()
	}
	if err != nil {
		c.skipped = err.Error()
		if errors.Is(err, measure.ErrNotBack) {
			c.fatal = fmt.Errorf("%w: every later figure would be charged to the server's group", err)
		}
		if srv != nil { // started, but the harness could not leave the group
			srv.stop()
		}
		removeGroup(g)
		return c
	}
	c.run = srv.oneShot
	c.cleanup = func() {
		srv.stop()
		removeGroup(g)
	}
	if c.cpuNote == "" {
		c.usage = func() (float64, error) {
			s, err := g.Total()
			return 1000 * s, err
		}
	}
	return c
}

// removeGroup removes g, if there is one (its server stopped).
func removeGroup(g *measure.AcctGroup) {
	if g != nil {
		g.Remove()
	}
}
