package agent

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/spawn"
)

// A server under a flood of connections can reach its RLIMIT_NOFILE (or
// the host its file limit). Every step that opens a descriptor can then
// fail for a while; none of those failures may end a session or leave an
// exec's processes running. An exec that cannot get its descriptors fails
// with spawn.ErrNoDescriptors, which front ends answer as retryable.

// outOfDescriptors says err is the kernel refusing a new descriptor.
func outOfDescriptors(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)
}

// descriptorError names a shortage of descriptors as such, and leaves any
// other error as it is.
func descriptorError(err error) error {
	if outOfDescriptors(err) && !errors.Is(err, spawn.ErrNoDescriptors) {
		return fmt.Errorf("%w: %v", spawn.ErrNoDescriptors, err)
	}
	return err
}

// retireTries bounds the retries of an exec cgroup's teardown while the
// server is out of descriptors: 10 ms doubling, about 1.3 s in all.
const retireTries = 7

// retire reads an exec cgroup's figures, kills what the exec left in it
// and removes it, retrying for a while when there is no descriptor to read
// its files with. A cgroup that still cannot be cleared is kept and
// cleared at the next start or at the session's end (clearStranded).
func (s *Session) retire(cg cgroup.Cgroup) cgroup.Stats {
	var stats cgroup.Stats
	_ = retry(func() error {
		var err error
		stats, err = cg.Stats()
		return err
	})
	if err := retry(func() error { return clearCgroup(cg) }); outOfDescriptors(err) {
		s.mu.Lock()
		s.stranded = append(s.stranded, cg)
		s.mu.Unlock()
	}
	return stats
}

// clearCgroup kills everything in cg and removes it. Removal is tried only
// once the kill went through: with processes left it would wait in vain.
func clearCgroup(cg cgroup.Cgroup) error {
	if err := cg.Kill(); err != nil {
		return err
	}
	return cg.Delete()
}

// retry runs fn until it succeeds, fails otherwise than for want of a
// descriptor, or has been tried retireTries times.
func retry(fn func() error) error {
	delay := 10 * time.Millisecond
	var err error
	for range retireTries {
		if err = fn(); !outOfDescriptors(err) {
			return err
		}
		time.Sleep(delay)
		delay *= 2
	}
	return err
}

// clearStranded tries once more to clear the exec cgroups retire had to
// leave, keeping those that still cannot be.
func (s *Session) clearStranded() {
	s.mu.Lock()
	stranded := s.stranded
	s.stranded = nil
	s.mu.Unlock()
	var left []cgroup.Cgroup
	for _, cg := range stranded {
		if err := clearCgroup(cg); outOfDescriptors(err) {
			left = append(left, cg)
		}
	}
	if len(left) > 0 {
		s.mu.Lock()
		s.stranded = append(s.stranded, left...)
		s.mu.Unlock()
	}
}
