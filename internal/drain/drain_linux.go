package drain

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// rawPipe is a pipe's reading end kept out of Go's network poller
// between reads. The poller registers a descriptor edge-triggered for its
// whole life, and the kernel then wakes it for every write to the pipe,
// each costing the host a context switch: a program writing a byte at a
// time kept a quarter of a core busy that way while the reader slept. A
// rawPipe reads its own descriptor, which no poller knows, and only when a
// read finds the pipe empty does it wait on a pollable duplicate, dropped
// as soon as the pipe is readable: a write while the reader pauses wakes
// nobody.
type rawPipe struct {
	mu      sync.Mutex // held around every use of fd
	fd      int
	waiting *os.File // the pollable duplicate a read waits on, if any
	closed  bool
	retry   time.Duration // the wait before another try at a duplicate
}

// newRawPipe duplicates f's descriptor and closes f (which takes it out
// of Go's poller), on failure too. A wait whose duplicate the system
// refuses for want of descriptors tries again after retry.
func newRawPipe(f *os.File, retry time.Duration) (*rawPipe, error) {
	fd, err := dupOf(f)
	// f's own descriptor goes; the duplicate shares its non-blocking
	// open file description. A pipe's close has nothing to report.
	_ = f.Close()
	if err != nil {
		return nil, fmt.Errorf("taking over the output pipe: %w", err)
	}
	// A read or splice must return EAGAIN on an empty pipe rather than
	// wait for a writer: make sure of it, whoever made the pipe.
	if err := unix.SetNonblock(fd, true); err != nil {
		// A pipe's close has nothing to report.
		_ = unix.Close(fd)
		return nil, fmt.Errorf("making the output pipe non-blocking: %w", err)
	}
	return &rawPipe{fd: fd, retry: retry}, nil
}

// grow grows the pipe to pipeSize, so a flood moves in large pieces. It
// is done only for a flood: every grown pipe counts against its user's
// fs.pipe-user-pages-soft, past which each new pipe of that user gets a
// single page.
func (r *rawPipe) grow() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	if _, err := unix.FcntlInt(uintptr(r.fd), unix.F_SETPIPE_SZ, pipeSize); err != nil {
		return fmt.Errorf("growing the output pipe to %d bytes: %w", pipeSize, err)
	}
	return nil
}

// dupOf duplicates f's descriptor, close-on-exec.
func dupOf(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(old uintptr) {
		fd, derr = unix.FcntlInt(old, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, err
	}
	return fd, derr
}

// read reads into b once the pipe has data or has ended (io.EOF). It
// returns os.ErrClosed once stop is closed.
func (r *rawPipe) read(b []byte, stop <-chan struct{}) (int, error) {
	return r.readOrWait(b, stop, true)
}

// readNow reads what the pipe holds now into b, 0 bytes (and no error)
// when it holds nothing.
func (r *rawPipe) readNow(b []byte) (int, error) {
	return r.readOrWait(b, nil, false)
}

func (r *rawPipe) readOrWait(b []byte, stop <-chan struct{}, wait bool) (int, error) {
	var n int
	again, err := r.do(func(fd int) error {
		var err error
		n, err = unix.Read(fd, b)
		return err
	}, wait, stop)
	switch {
	case err != nil:
		return 0, err
	case again:
		return 0, nil
	case n == 0 && len(b) > 0:
		return 0, io.EOF
	}
	return n, nil
}

// discard splices what the pipe holds into /dev/null, which frees the
// pipe's pages without copying them, once the pipe has data or has ended.
// It returns errors.ErrUnsupported when /dev/null cannot take it, for
// the caller to read instead.
func (r *rawPipe) discard(stop <-chan struct{}) (int64, error) {
	null, err := devNull()
	if err != nil {
		return 0, fmt.Errorf("%w: opening %s: %w", errors.ErrUnsupported, os.DevNull, err)
	}
	var n int64
	_, err = r.do(func(fd int) error {
		var err error
		n, err = unix.Splice(fd, nil, null, nil, pipeSize, unix.SPLICE_F_NONBLOCK)
		return err
	}, true, stop)
	switch {
	case errors.Is(err, unix.EINVAL):
		return 0, fmt.Errorf("%w: splice: %w", errors.ErrUnsupported, err)
	case err != nil:
		return 0, err
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// do runs op on the descriptor and, while the pipe is empty and wait is
// set, again whenever the pipe may have become readable. It says whether
// the pipe was still empty (EAGAIN) when do returned.
func (r *rawPipe) do(op func(fd int) error, wait bool, stop <-chan struct{}) (bool, error) {
	again, err := r.try(op)
	if !again || !wait {
		return again, err
	}
	werr := r.await(func() bool {
		again, err = r.try(op)
		return !again
	}, stop)
	if werr != nil {
		return false, werr
	}
	return again, err
}

// try runs op on the descriptor unless it is closed, and says whether op
// must wait for the pipe (EAGAIN); EINTR is retried. op must make its
// system call through Go's scheduler (unix.Read, unix.Splice), never as a
// raw call: O_NONBLOCK does not keep a read or splice from waiting,
// uninterruptibly, for the pipe's lock, which the sandbox can hold as long
// as it likes (a splice into the pipe from an empty socket), and a raw
// call that waits keeps its P, so a stop-the-world collection and every
// timer of the process wait with it (TestLockedPipeBlocksNobody).
func (r *rawPipe) try(op func(fd int) error) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false, os.ErrClosed
	}
	for {
		err := op(r.fd)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return true, nil
		case err != nil:
			return false, fmt.Errorf("reading output: %w", err)
		}
		return false, nil
	}
}

// await calls done each time the pipe may have become readable (data, or
// its writers gone) until it returns true, waiting in Go's poller on a
// duplicate of the descriptor that lives only for this wait. done must
// make the attempt itself: the poller forgets readiness that arrives
// before its wait begins, so only a failed attempt proves it must wait.
func (r *rawPipe) await(done func() bool, stop <-chan struct{}) error {
	f, err := r.duplicate(stop)
	if err != nil {
		return err
	}
	defer func() {
		r.mu.Lock()
		r.waiting = nil
		r.mu.Unlock()
		// Closing a pipe's descriptor has nothing to report.
		_ = f.Close()
	}()
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("waiting for output: %w", err)
	}
	err = rc.Read(func(uintptr) bool { return done() })
	select {
	case <-stop:
		return os.ErrClosed
	default:
	}
	if err != nil {
		return fmt.Errorf("waiting for output: %w", err)
	}
	return nil
}

// duplicate returns a pollable duplicate of the descriptor, recorded as
// the one a read waits on. While the process or the system is out of
// descriptors it tries again every retry until stop is closed, rather
// than end the reading for good over a passing shortage: meanwhile the
// writer waits on its full pipe, as it would at the pace.
func (r *rawPipe) duplicate(stop <-chan struct{}) (*os.File, error) {
	var timer *time.Timer
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return nil, os.ErrClosed
		}
		fd, err := unix.FcntlInt(uintptr(r.fd), unix.F_DUPFD_CLOEXEC, 0)
		if err == nil {
			// The description is non-blocking, so the File joins the poller.
			f := os.NewFile(uintptr(fd), "output pipe")
			r.waiting = f
			r.mu.Unlock()
			return f, nil
		}
		r.mu.Unlock()
		if !errors.Is(err, unix.EMFILE) && !errors.Is(err, unix.ENFILE) {
			return nil, fmt.Errorf("waiting for output: %w", err)
		}
		if timer == nil {
			timer = time.NewTimer(r.retry)
			defer timer.Stop()
		} else {
			timer.Reset(r.retry)
		}
		select {
		case <-timer.C:
		case <-stop:
			return nil, os.ErrClosed
		}
	}
}

// close closes the descriptor, ending a wait in progress. The waiting
// duplicate is closed after mu is released: File.Close waits for the
// wait on it to return, and a wait that the pipe just woke is about to
// take mu for its next attempt (which then finds the pipe closed), so
// closing it under mu would deadlock.
func (r *rawPipe) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	waiting := r.waiting
	// Closing a pipe's reading end frees it whatever close returns.
	_ = unix.Close(r.fd)
	r.mu.Unlock()
	if waiting != nil {
		// A second close of the duplicate (await's own) only says so.
		_ = waiting.Close()
	}
}

// null is /dev/null's descriptor, opened for writing once per process:
// the target of every splice. Only a success is kept, so that a passing
// shortage of descriptors does not disable splicing for good.
var null struct {
	mu     sync.Mutex
	fd     int
	opened bool
}

// devNull returns null's descriptor, opening it if it is not yet open.
func devNull() (int, error) {
	null.mu.Lock()
	defer null.mu.Unlock()
	if null.opened {
		return null.fd, nil
	}
	fd, err := unix.Open(os.DevNull, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	null.fd, null.opened = fd, true
	return fd, nil
}
