package microvm

import (
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestBootDeadline checks the boot deadline's stretch: by the time QEMU
// waited for a CPU, never before the timeout and never past
// maxBootStretch timeouts.
func TestBootDeadline(t *testing.T) {
	start := time.Unix(1000, 0)
	for _, c := range []struct {
		name    string
		starved time.Duration
		want    time.Duration
	}{
		{"not starved", 0, 10 * time.Second},
		{"starved 25 s", 25 * time.Second, 35 * time.Second},
		{"starved past the bound", time.Hour, maxBootStretch * 10 * time.Second},
		{"negative run_delay", -time.Second, 10 * time.Second},
		{"run_delay at its most (would wrap)", math.MaxInt64, maxBootStretch * 10 * time.Second},
	} {
		if got := bootDeadline(start, 10*time.Second, c.starved).Sub(start); got != c.want {
			t.Errorf("%s: deadline %v after the start, want %v", c.name, got, c.want)
		}
	}
}

func TestParseRunDelay(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1000 2500000 7\n", 2500 * time.Microsecond, true},
		{"0 0 0", 0, true},
		{"1000 2500000\n", 0, false},
		{"1000 2500000 7 9\n", 0, false},
		{"1000 -5 7\n", 0, false},
		{"1000 99999999999999999999 7\n", 0, false},
		{"", 0, false},
	} {
		got, ok := parseRunDelay([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("parseRunDelay(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestLongestWait checks the longest run_delay of a task directory is
// taken, skipping threads whose file is missing or malformed.
func TestLongestWait(t *testing.T) {
	dir := t.TempDir()
	for tid, line := range map[string]string{
		"1": "10 3000 1\n", "2": "10 9000 1\n", "3": "junk\n", "4": "10 99999999999 1 " + string(make([]byte, maxSchedstat)),
	} {
		if err := os.MkdirAll(filepath.Join(dir, tid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, tid, "schedstat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "5"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := longestWait(dir); got != 9*time.Microsecond {
		t.Errorf("longestWait = %v, want 9µs", got)
	}
	if got := longestWait(filepath.Join(dir, "gone")); got != 0 {
		t.Errorf("longestWait of a missing directory = %v, want 0", got)
	}
}

// TestLongestWaitReadsThisProcess reads the real schedstat files of the
// test process, as the boot's deadline reads QEMU's.
func TestLongestWaitReadsThisProcess(t *testing.T) {
	self := filepath.Join("/proc", strconv.Itoa(os.Getpid()), "task", strconv.Itoa(os.Getpid()), "schedstat")
	if _, err := os.Stat(self); err != nil {
		t.Skipf("no schedstat on this kernel (CONFIG_SCHED_INFO): %v", err)
	}
	if _, ok := readRunDelay(self); !ok {
		t.Errorf("readRunDelay(%s) failed, want this thread's run_delay", self)
	}
}

// deadlineConn is a net.Conn that records the read deadlines set on it.
type deadlineConn struct {
	net.Conn
	mu    sync.Mutex
	set   []time.Time
	moved chan struct{} // closed once a deadline equal to want is set
	want  time.Time
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set = append(c.set, t)
	if t.Equal(c.want) && c.moved != nil {
		close(c.moved)
		c.moved = nil
	}
	return nil
}

func (c *deadlineConn) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.set)
}

// TestStretchDeadlineStops fakes QEMU's wait for a CPU: the first
// deadline is the plain timeout, the mover then sets it later by the
// starved time (a deadline that had passed, moved into the future), and
// after stop it sets none. Without the mover, or with bootDeadline
// ignoring starved, no deadline equals the moved one and the test fails.
func TestStretchDeadlineStops(t *testing.T) {
	started := time.Unix(1000, 0)
	const timeout, starved = 10 * time.Second, 25 * time.Second
	conn := &deadlineConn{moved: make(chan struct{}), want: started.Add(timeout + starved)}
	moved := conn.moved
	stop, err := moveDeadline(conn, func() time.Duration { return starved }, started, timeout)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-moved:
	case <-time.After(100 * bootCheckEvery): // a bound on a broken mover, not a timing check
		stop()
		t.Fatalf("no read deadline %v set in %v; %d set, the last %v", conn.want, 100*bootCheckEvery, len(conn.set), conn.set[len(conn.set)-1])
	}
	if got := stop(); got != starved {
		t.Errorf("stop() = %v, want the starved time %v", got, starved)
	}
	n := conn.calls()
	if first := conn.set[0]; !first.Equal(started.Add(timeout)) {
		t.Errorf("first deadline %v, want the plain timeout %v", first, started.Add(timeout))
	}
	// stop joined the mover, so nothing can set a deadline after it;
	// give a leaked mover two rounds to show itself (it cannot pass
	// wrongly for being slow, only miss a leak).
	time.Sleep(2 * bootCheckEvery)
	if got := conn.calls(); got != n {
		t.Errorf("%d deadlines set after stop, want none", got-n)
	}
}
