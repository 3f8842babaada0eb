//go:build linux

package main

import "fmt"

// apiPool is the --pool of the API contenders: enough for the rounds of a
// cold-start table, where the pool refills between runs; a burst of
// concurrent runs drains it, and the rest are built on demand.
const apiPool = 8

// oneShot runs prog through POST /v1/run and returns the request's wall
// time in ms, failing on anything but exit 0.
func (s *server) oneShot(prog []string) (float64, error) { return s.OneShot(prog) }

// apiContender runs programs through a warden serve's one-shot API, with
// pool sandboxes built ahead (or none): what an agent that calls Warden
// over HTTP waits for, without a CLI process per run.
func apiContender(warden string, pool int) *contender {
	name := "warden native API"
	extra := []string{"--pool", fmt.Sprint(pool)}
	if pool > 0 {
		name += fmt.Sprintf(" (pool %d)", pool)
	}
	c := &contender{name: name}
	srv, err := startServer(warden, "native", extra...)
	if err != nil {
		c.skipped = err.Error()
		return c
	}
	c.run = srv.oneShot
	c.cleanup = srv.stop
	return c
}
