package microvm

import (
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
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

// TestStretchDeadlineStops runs the deadline's mover on this process for
// a few rounds and stops it: stop returns, with the starved time seen,
// and a read past the deadline it set fails with a deadline error.
func TestStretchDeadlineStops(t *testing.T) {
	host, guest := net.Pipe()
	defer host.Close()
	defer guest.Close()
	stop, err := stretchDeadline(host, os.Getpid(), time.Now().Add(-time.Hour), time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * bootCheckEvery) // lets it move the deadline a few times
	if starved := stop(); starved < 0 {
		t.Errorf("starved = %v, want at least 0", starved)
	}
	if _, err := host.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read after the deadline = %v, want a deadline error", err)
	}
}
