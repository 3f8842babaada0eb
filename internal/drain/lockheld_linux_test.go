package drain

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// holdEnv, set in a child's environment, makes the test binary hold its
// stdout pipe's lock instead of running tests (holdPipeLock).
const holdEnv = "WARDEN_DRAIN_TEST_HOLD_PIPE_LOCK"

// holdFor is how long the child holds the lock: the watchdog that keeps a
// broken drain from freezing the test for good.
const holdFor = 30 * time.Second

// TestMain runs holdPipeLock instead of the tests in a child started with
// holdEnv.
func TestMain(m *testing.M) {
	if os.Getenv(holdEnv) != "" {
		os.Exit(holdPipeLock())
	}
	os.Exit(m.Run())
}

// holdPipeLock writes a byte to stdout, then holds the pipe's lock as a
// hostile sandbox can: a splice into it from an empty blocking socket
// waits for data with the lock held. After holdFor it sends the socket a
// byte, which ends the splice and the lock.
func holdPipeLock() int {
	sv, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 2
	}
	if _, err := unix.Write(1, []byte("a")); err != nil {
		return 3
	}
	go func() {
		time.Sleep(holdFor)
		_, _ = unix.Write(sv[1], []byte("W"))
	}()
	if _, err := unix.Splice(sv[0], nil, 1, nil, 1<<16, 0); err != nil {
		return 4
	}
	return 0
}

// TestLockedPipeBlocksNobody: a drain whose read or splice waits for a
// pipe lock the sandbox holds must not stop the rest of the process, even
// with a single P: a collection and a timer must finish before the
// child's watchdog lets the lock go. A raw system call keeps its P while
// it waits, and froze a whole warden serve this way.
func TestLockedPipeBlocksNobody(t *testing.T) {
	tests := []struct {
		name  string
		drain func(p *Pipe) error
	}{
		{"Read", func(p *Pipe) error { _, err := p.Read(make([]byte, 64)); return err }},
		{"Discard", func(p *Pipe) error { _, err := p.Discard(); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkLockedPipe(t, tt.drain) })
	}
}

// checkLockedPipe starts a child holding its stdout pipe's lock, calls
// drain on that pipe, and checks that a collection and a timer finish
// before drain returns (which needs the child to let the lock go).
func checkLockedPipe(t *testing.T, drain func(p *Pipe) error) {
	p, child := lockedPipe(t)
	var order atomic.Int32
	var released int32
	started, ended := make(chan struct{}), make(chan struct{})
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	go func() {
		defer close(ended)
		close(started)
		if err := drain(p); err != nil {
			t.Errorf("draining the pipe once the lock was free: %v", err)
		}
		released = order.Add(1)
	}()
	<-started
	runtime.GC()
	<-time.After(time.Millisecond)
	collected := order.Add(1)
	if err := child.Process.Kill(); err != nil {
		t.Errorf("ending the child: %v", err)
	}
	within(t, ended, "the drain still waits for the pipe after its writer was killed")
	if released < collected {
		t.Errorf("the drain got the pipe (step %d) before a collection and a timer finished (step %d), "+
			"want the collection first: a drain waiting for the pipe's lock held the only P", released, collected)
	}
}

// lockedPipe returns a Pipe over the stdout of a child that holds the
// pipe's lock, once it does, with the pipe's first byte unread.
func lockedPipe(t *testing.T) (*Pipe, *exec.Cmd) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), holdEnv+"=1")
	child.Stdout, child.Stderr = w, os.Stderr
	if err := child.Start(); err != nil {
		t.Fatalf("starting the child: %v", err)
	}
	w.Close()
	t.Cleanup(func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	done := make(chan struct{})
	close(done) // no pauses: the drain goes straight to the pipe
	p, err := New(r, done, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	waitInSplice(t, child.Process.Pid)
	return p, child
}

// waitInSplice returns once a thread of pid waits in splice(2), holding
// its stdout pipe's lock, or fails the test after a bounded wait.
func waitInSplice(t *testing.T, pid int) {
	t.Helper()
	want := strconv.Itoa(unix.SYS_SPLICE)
	for range 6000 {
		tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/syscall")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if fields := strings.Fields(string(b)); err == nil && len(fields) > 0 && fields[0] == want {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("after a minute, the child still does not wait in splice")
}

// TestBlockingPipeStillCloses: a pipe handed over in blocking mode is made
// non-blocking, so a read with nothing to read waits in the poller, and
// Close ends it with os.ErrClosed. A blocking read would wait in the
// kernel with the Pipe's lock held, and Close with it.
func TestBlockingPipeStillCloses(t *testing.T) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	w := os.NewFile(uintptr(fds[1]), "writer")
	defer w.Close()
	p, err := New(os.NewFile(uintptr(fds[0]), "blocking reader"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := p.Read(make([]byte, 16))
		ended <- err
	}()
	waitReading(t, p)
	go p.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("a read during Close returned %v, want os.ErrClosed", err)
		}
	case <-time.After(time.Minute):
		t.Error("a read of a pipe handed over blocking still waits a minute after Close")
		// Free the read, and with it Close, so the test ends.
		_, _ = w.Write([]byte("x"))
		<-ended //nolint:errcheck // a wait for the goroutine to end: its result is not what this test checks
	}
}

// waitReading returns once p's reader waits, in the poller or blocked in
// read(2) on its descriptor, or after a bounded number of looks. It never
// waits for p's lock, which a blocked read holds.
func waitReading(t *testing.T, p *Pipe) {
	t.Helper()
	fd := "0x" + strconv.FormatInt(int64(p.raw.fd), 16)
	read := strconv.Itoa(unix.SYS_READ)
	for range 60000 {
		if p.raw.mu.TryLock() {
			parked := p.raw.waiting != nil
			p.raw.mu.Unlock()
			if parked {
				return
			}
		}
		tasks, err := filepath.Glob("/proc/self/task/*/syscall")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if fields := strings.Fields(string(b)); err == nil && len(fields) > 1 && fields[0] == read && fields[1] == fd {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the reader neither waits in the poller nor reads after a minute")
}
