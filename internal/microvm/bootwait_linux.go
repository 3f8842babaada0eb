package microvm

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// A boot is CPU-bound work: under TCG the guest's kernel is emulated, so a
// boot of 1-2 s on an idle 2-core host took 8-13 s at load 15-20, when
// QEMU's threads waited for a CPU most of the time, and overran the 10 s
// default although nothing in the guest was wrong. Config.BootTimeout
// therefore does not count the time the host kept QEMU waiting for a CPU:
// the deadline moves out by the longest any of QEMU's threads has waited,
// runnable, on a run queue (run_delay, the second field of
// /proc/<pid>/task/<tid>/schedstat, in ns; its CPU quota's throttling
// counts there too), up to maxBootStretch times the timeout from QEMU's
// start, so a guest that never says hello still fails in bounded time.
const (
	// maxBootStretch bounds the moved deadline, in boot timeouts.
	maxBootStretch = 6
	// bootCheckEvery is how often the deadline is moved.
	bootCheckEvery = 200 * time.Millisecond
	// maxSchedstat bounds a schedstat read: three decimal numbers.
	maxSchedstat = 96
)

// bootDeadline is when a boot started at started with timeout fails,
// given that QEMU has waited starved for a CPU so far. starved (read from
// /proc, up to 2^63-1 ns) is clamped before it is added, so the sum cannot
// wrap; timeout is at most maxBootTimeout (Config), so neither can the
// bound.
func bootDeadline(started time.Time, timeout, starved time.Duration) time.Time {
	return started.Add(timeout + min(max(starved, 0), (maxBootStretch-1)*timeout))
}

// stretchDeadline sets conn's read deadline for the hello and moves it
// out, every bootCheckEvery, by the time QEMU (pid) has waited for a CPU;
// the returned stop ends that, after which the deadline no longer moves.
// It returns the starved time last seen with it, for the error.
func stretchDeadline(conn net.Conn, pid int, started time.Time, timeout time.Duration) (stop func() time.Duration, err error) {
	tasks := filepath.Join("/proc", strconv.Itoa(pid), "task")
	return moveDeadline(conn, func() time.Duration { return longestWait(tasks) }, started, timeout)
}

// moveDeadline is stretchDeadline with the starved time read by waited,
// which a test fakes.
func moveDeadline(conn net.Conn, waited func() time.Duration, started time.Time, timeout time.Duration) (stop func() time.Duration, err error) {
	if err := conn.SetReadDeadline(bootDeadline(started, timeout, 0)); err != nil {
		return nil, fmt.Errorf("microvm: setting the boot deadline: %w", err)
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	var starved time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(bootCheckEvery)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			starved = max(starved, waited())
			// A failure leaves the deadline where it was: the boot
			// fails no later than without the stretch.
			_ = conn.SetReadDeadline(bootDeadline(started, timeout, starved))
		}
	}()
	return func() time.Duration {
		close(quit)
		wg.Wait()
		return starved
	}, nil
}

// longestWait is the longest run_delay of the threads listed in tasks
// (a /proc/<pid>/task directory), or 0 when none can be read: without
// schedstat the deadline does not move.
func longestWait(tasks string) time.Duration {
	ents, err := os.ReadDir(tasks)
	if err != nil {
		return 0
	}
	var longest time.Duration
	for _, e := range ents {
		if d, ok := readRunDelay(filepath.Join(tasks, e.Name(), "schedstat")); ok {
			longest = max(longest, d)
		}
	}
	return longest
}

// readRunDelay reads one thread's schedstat file.
func readRunDelay(path string) (time.Duration, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	b := make([]byte, maxSchedstat+1)
	n, err := f.Read(b)
	if err != nil || n > maxSchedstat {
		return 0, false
	}
	return parseRunDelay(b[:n])
}

// parseRunDelay takes run_delay from a schedstat line: exactly three
// unsigned decimal fields (time run, time waited, timeslices), in ns.
func parseRunDelay(b []byte) (time.Duration, bool) {
	f := bytes.Fields(b)
	if len(f) != 3 {
		return 0, false
	}
	var v [3]uint64
	for i, x := range f {
		n, err := strconv.ParseUint(string(x), 10, 63)
		if err != nil {
			return 0, false
		}
		v[i] = n
	}
	return time.Duration(v[1]), true
}
