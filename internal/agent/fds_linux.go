package agent

import (
	"errors"
	"fmt"
	"time"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/spawn"
)

// A server under a flood of connections can reach its RLIMIT_NOFILE (or
// the host its file limit). Every step that opens a descriptor can then
// fail for a while; none of those failures may end a session or leave an
// exec's processes running. An exec that cannot get its descriptors fails
// with spawn.ErrNoDescriptors, which front ends answer as retryable.

// outOfDescriptors says err is a shortage of descriptors.
var outOfDescriptors = spawn.OutOfDescriptors

// descriptorError names a shortage of descriptors as such, and leaves any
// other error as it is.
func descriptorError(err error) error {
	if outOfDescriptors(err) && !errors.Is(err, spawn.ErrNoDescriptors) {
		return fmt.Errorf("%w: %v", spawn.ErrNoDescriptors, err) //nolint:errorlint // ErrNoDescriptors is what callers match; the errno is text only
	}
	return err
}

// retireBudget bounds the time an exec cgroup's teardown spends retrying
// while the server is out of descriptors: reading its figures and
// clearing it share it, pausing 10 ms and doubling.
const retireBudget = 1300 * time.Millisecond

// retire reads an exec cgroup's figures, kills what the exec left in it
// and removes it, retrying for a while when there is no descriptor to read
// its files with. A cgroup that still cannot be removed is stranded:
// cleared at the next start, or removed at the session's end (teardown).
// Once the session is ending nothing is retried and nothing killed: its
// init is dying, with every process of the sandbox, and teardown removes
// the cgroup once it has exited. Figures that could not be read are
// reported by teardown, as is a cgroup that it cannot remove either.
func (s *Session) retire(cg cgroup.Cgroup) cgroup.Stats {
	var stats cgroup.Stats
	readStats := func() error {
		var err error
		stats, err = cg.Stats()
		return err
	}
	if s.ending() {
		s.note(wrapCleanup(cg, "reading the figures of", readStats()))
		s.strand(cg)
		return stats
	}
	r := newRetrier(retireBudget)
	s.note(wrapCleanup(cg, "reading the figures of", r.do(readStats)))
	if r.do(func() error { return clearCgroup(cg) }) != nil {
		s.strand(cg)
	}
	return stats
}

// clearCgroup kills everything in cg and removes it. The removal is tried
// even when the kill failed: listing the cgroup's processes needs a
// descriptor, removing it does not, and an empty cgroup then still goes.
// Only a removal that fails (EBUSY: processes remain) leaves it.
func clearCgroup(cg cgroup.Cgroup) error {
	kerr := cg.Kill()
	if derr := cg.Delete(); derr != nil {
		return errors.Join(kerr, derr)
	}
	return nil
}

// wrapCleanup says which cleanup step of which cgroup failed, or is nil.
func wrapCleanup(cg cgroup.Cgroup, step string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s exec cgroup %s: %w", step, cg.Path(), err)
}

// retrier retries steps that fail for want of a descriptor within one
// time budget, shared by every step it runs.
type retrier struct {
	deadline time.Time
	delay    time.Duration
	now      func() time.Time
	sleep    func(time.Duration)
}

func newRetrier(budget time.Duration) *retrier {
	return &retrier{deadline: time.Now().Add(budget), delay: 10 * time.Millisecond, now: time.Now, sleep: time.Sleep}
}

// do runs fn until it succeeds, fails otherwise than for want of a
// descriptor, or the budget would end before the next try: it never
// pauses after its last try.
func (r *retrier) do(fn func() error) error {
	for {
		err := fn()
		if !outOfDescriptors(err) || r.now().Add(r.delay).After(r.deadline) {
			return err
		}
		r.sleep(r.delay)
		r.delay *= 2
	}
}

// strand keeps an exec cgroup retire could not remove.
func (s *Session) strand(cg cgroup.Cgroup) {
	s.mu.Lock()
	s.stranded = append(s.stranded, cg)
	s.mu.Unlock()
}

// takeStranded returns the stranded exec cgroups, now the caller's.
func (s *Session) takeStranded() []cgroup.Cgroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	stranded := s.stranded
	s.stranded = nil
	return stranded
}

// clearStranded tries once more, before an exec starts, to clear the exec
// cgroups retire had to leave, keeping those that still cannot be.
func (s *Session) clearStranded() {
	for _, cg := range s.takeStranded() {
		if err := clearCgroup(cg); err != nil {
			s.strand(cg)
		}
	}
}

// maxNoted bounds the cleanup errors a session keeps for teardown.
const maxNoted = 8

// note keeps a cleanup error for teardown to return (the first maxNoted,
// and a count of the rest).
func (s *Session) note(err error) {
	if err == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cleanupErrs) < maxNoted {
		s.cleanupErrs = append(s.cleanupErrs, err)
	} else {
		s.moreErrs++
	}
}

// takeNoted returns the cleanup errors noted so far, joined.
func (s *Session) takeNoted() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := s.cleanupErrs
	if s.moreErrs > 0 {
		errs = append(errs, fmt.Errorf("and %d more cleanup errors", s.moreErrs))
	}
	s.cleanupErrs, s.moreErrs = nil, 0
	return errors.Join(errs...)
}

// ending says the session is over or being closed: its processes are
// dying with its init.
func (s *Session) ending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil || s.closed
}
