package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/boxname"
)

// Freeze writes FROZEN to the v1 freezer's freezer.state and waits until it reads FROZEN: the
// kernel reports FREEZING while any task has yet to stop.
func (c *v1Cgroup) Freeze(timeout time.Duration) error {
	if c.freezer == "" {
		return fmt.Errorf("freezing cgroup %s: %w: the v1 freezer hierarchy is not mounted on this host: mount it (mount -t cgroup -o freezer freezer /sys/fs/cgroup/freezer) to pause sessions", c.Path(), errors.ErrUnsupported)
	}
	state := c.freezer + "/freezer.state"
	if err := writeFile(state, "FROZEN"); err != nil {
		return fmt.Errorf("freezing cgroup %s: %w", c.freezer, err)
	}
	frozen := func() (bool, error) {
		b, err := readSmall(state)
		return strings.TrimSpace(string(b)) == "FROZEN", err
	}
	return settle(c.freezer, timeout, frozen, c.Thaw)
}

// Thaw writes THAWED to freezer.state, which the kernel applies at once.
func (c *v1Cgroup) Thaw() error {
	if c.freezer == "" {
		return fmt.Errorf("thawing cgroup %s: %w: the v1 freezer hierarchy is not mounted on this host", c.Path(), errors.ErrUnsupported)
	}
	if err := writeFile(c.freezer+"/freezer.state", "THAWED"); err != nil {
		return fmt.Errorf("thawing cgroup %s: %w", c.freezer, err)
	}
	return nil
}

// Freeze writes 1 to cgroup.freeze (Linux 5.2+) and waits until cgroup.events says frozen 1.
func (c *v2Cgroup) Freeze(timeout time.Duration) error {
	if err := writeFile(c.dir+"/cgroup.freeze", "1"); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("freezing cgroup %s: %w: there is no cgroup.freeze (Linux 5.2 added it), or the cgroup is gone", c.dir, errors.ErrUnsupported)
		}
		return fmt.Errorf("freezing cgroup %s: %w", c.dir, err)
	}
	frozen := func() (bool, error) {
		kv, err := readKeyed(c.dir + "/cgroup.events")
		return kv["frozen"] == 1, err
	}
	return settle(c.dir, timeout, frozen, c.Thaw)
}

// Thaw writes 0 to cgroup.freeze.
func (c *v2Cgroup) Thaw() error {
	if err := writeFile(c.dir+"/cgroup.freeze", "0"); err != nil {
		return fmt.Errorf("thawing cgroup %s: %w", c.dir, err)
	}
	return nil
}

// settle polls frozen until it holds, first every 50 µs and backing off to every millisecond
// (a few tasks stop within tens of microseconds; a busy box may take longer), until timeout.
// On timeout, or when frozen cannot be read, it thaws the cgroup at dir again, so that a
// failed Freeze never leaves a box stopped half-way.
func settle(dir string, timeout time.Duration, frozen func() (bool, error), thaw func() error) error {
	deadline := time.Now().Add(timeout)
	wait := 50 * time.Microsecond
	for {
		ok, err := frozen()
		switch {
		case err != nil:
			return errors.Join(fmt.Errorf("reading whether cgroup %s is frozen: %w", dir, err), thaw())
		case ok:
			return nil
		case time.Now().After(deadline):
			return errors.Join(fmt.Errorf("freezing cgroup %s: %w within %v; it was thawed again", dir, ErrFreezeTimeout, timeout), thaw())
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Millisecond)
	}
}

// endAllFrozen ends the processes of the stale cgroups a paused session left frozen (see
// endFrozen), first of all, so that they have exited by the time the cgroups are removed in
// every hierarchy (the freezer's is only one of them); it waits for that, briefly.
func endAllFrozen(stale []string, dead func(pid int) bool) error {
	var errs []error
	var ended []string
	for _, dir := range stale {
		if pid, ok := boxname.OwnerPID(filepath.Base(dir)); !ok || !dead(pid) || !frozenDir(dir) {
			continue
		}
		if err := endFrozen(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		ended = append(ended, dir)
	}
	if len(ended) > 0 {
		waitFor(staleExitWait, func() bool {
			for _, dir := range ended {
				if pids, err := treePids(dir); err == nil && len(pids) > 0 {
					return false
				}
			}
			return true
		})
	}
	return errors.Join(errs...)
}

// staleExitWait bounds the wait for killed, thawed processes to exit; a cgroup they still
// hold is left to the next sweep.
const staleExitWait = time.Second

// endFrozen ends what is left in a stale cgroup that a paused session left frozen when its
// server died: a frozen process handles no signal until thawed, so the kill the server's death
// sent its sandbox (the init's parent-death signal) is pending there for ever. Every process
// in dir and its children is killed, then dir is thawed, so they die without running again;
// removeStaleDir then removes the emptied cgroup.
func endFrozen(dir string) error {
	if err := killAll(func() ([]int, error) { return treePids(dir) }); err != nil {
		return fmt.Errorf("killing the processes of frozen stale cgroup %s: %w", dir, err)
	}
	err := writeFile(dir+"/freezer.state", "THAWED")
	if errors.Is(err, fs.ErrNotExist) {
		err = writeFile(dir+"/cgroup.freeze", "0")
	}
	if err != nil {
		return fmt.Errorf("thawing stale cgroup %s: %w", dir, err)
	}
	return nil
}

// frozenDir says the v1 freezer or v2 cgroup at dir is frozen, or freezing.
func frozenDir(dir string) bool {
	if b, err := readSmall(dir + "/freezer.state"); err == nil {
		return strings.TrimSpace(string(b)) != "THAWED"
	}
	if b, err := readSmall(dir + "/cgroup.freeze"); err == nil {
		return strings.TrimSpace(string(b)) == "1"
	}
	return false
}
