package agent

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/cgroup"
)

// fakeRetrier is a retrier on a clock that only its pauses advance.
func fakeRetrier(budget time.Duration) (*retrier, *[]time.Duration) {
	clock := time.Unix(0, 0)
	var slept []time.Duration
	r := &retrier{deadline: clock.Add(budget), delay: 10 * time.Millisecond,
		now:   func() time.Time { return clock },
		sleep: func(d time.Duration) { slept = append(slept, d); clock = clock.Add(d) }}
	return r, &slept
}

// TestRetrierSharesOneBudget: steps that keep failing for want of a
// descriptor are retried within one budget for all of them, and the
// retrier never pauses after its last try.
func TestRetrierSharesOneBudget(t *testing.T) {
	r, slept := fakeRetrier(retireBudget)
	tries := 0
	emfile := func() error { tries++; return fmt.Errorf("open: %w", unix.EMFILE) }
	first := r.do(emfile)
	second := r.do(emfile)
	if !errors.Is(first, unix.EMFILE) || !errors.Is(second, unix.EMFILE) {
		t.Fatalf("do() = %v, %v; want EMFILE", first, second)
	}
	var total time.Duration
	for _, d := range *slept {
		total += d
	}
	if total > retireBudget {
		t.Errorf("paused %v in all (%v), want at most the budget %v", total, *slept, retireBudget)
	}
	// Each pause is followed by a try: the first step's tries, less
	// one, plus the second's, which had no time for a pause.
	if want := tries - 2; len(*slept) != want {
		t.Errorf("%d tries, %d pauses (%v); want %d pauses (none after a last try)", tries, len(*slept), *slept, want)
	}
	if other := r.do(func() error { return unix.EACCES }); !errors.Is(other, unix.EACCES) {
		t.Errorf("do() of another failure = %v, want it returned at once", other)
	}
}

// fakeCgroup is a cgroup whose Delete fails until failures runs out.
type fakeCgroup struct {
	cgroup.Cgroup
	path     string
	failures int
	deleted  *[]string
}

func (c *fakeCgroup) Path() string { return c.path }
func (c *fakeCgroup) Delete() error {
	if c.failures > 0 {
		c.failures--
		return fmt.Errorf("removing cgroup %s: %w", c.path, unix.EBUSY)
	}
	*c.deleted = append(*c.deleted, c.path)
	return nil
}

// TestSweeperRemovesInOrderAndGivesUp: the sweeper removes children
// before their parent, retries what fails, and gives up (logging it)
// after sweepTries rounds.
func TestSweeperRemovesInOrderAndGivesUp(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	w := newSweeper(func(time.Duration) {}, func(msg string, args ...any) {
		mu.Lock()
		logged = append(logged, fmt.Sprint(msg, args))
		mu.Unlock()
	})
	var deleted []string
	idle := w.idle
	w.add(&fakeCgroup{path: "s/e1", failures: 3, deleted: &deleted}, &fakeCgroup{path: "s", deleted: &deleted})
	<-idle
	if want := []string{"s/e1", "s"}; !slices.Equal(deleted, want) {
		t.Errorf("removed %v, want %v", deleted, want)
	}
	idle = w.idle
	w.add(&fakeCgroup{path: "stuck", failures: sweepTries, deleted: &deleted})
	<-idle
	mu.Lock()
	defer mu.Unlock()
	if len(logged) != 1 || len(deleted) != 2 {
		t.Errorf("after %d failed rounds: logged %q, removed %v; want one line, nothing more removed", sweepTries, logged, deleted)
	}
}
