package drain

import (
	"bytes"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sizeOf is the size of the pipe p reads.
func sizeOf(t *testing.T, p *Pipe) int {
	t.Helper()
	n, err := unix.FcntlInt(uintptr(p.raw.fd), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestGrowsOnlyForFlood checks that a pipe keeps its size until a paced
// read or Discard finds it full: each grown pipe counts against its
// user's fs.pipe-user-pages-soft, so only a flood may grow one, not a
// short output past the limit nor an idle interpreter's skimmed stream.
func TestGrowsOnlyForFlood(t *testing.T) {
	p, w := newTestPipe(t, nil)
	steps := []struct {
		what string
		n    int
		read func() error
		want func(int) bool
	}{
		{"a plain read", 6, func() error { _, err := p.Read(make([]byte, 64)); return err }, notGrown},
		{"a short discard", 6, func() error { _, err := p.Discard(); return err }, notGrown},
		{"a short skim", 6, func() error { return p.Skim(make([]byte, 64), func([]byte) {}) }, notGrown},
		{"a discard of a full pipe", floodRead, func() error { _, err := p.Discard(); return err }, grown},
	}
	for _, s := range steps {
		if _, err := w.Write(bytes.Repeat([]byte{'x'}, s.n)); err != nil {
			t.Fatalf("before %s: %v", s.what, err)
		}
		if err := s.read(); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		if got := sizeOf(t, p); !s.want(got) {
			t.Errorf("after %s: pipe size %d", s.what, got)
		}
	}
}

func notGrown(size int) bool { return size < pipeSize }
func grown(size int) bool    { return size == pipeSize }

// exhaustDescriptors lowers the process's descriptor limit and fills it,
// so that the next new descriptor fails with EMFILE; release undoes both.
func exhaustDescriptors(t *testing.T) (release func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	var held []int
	release = func() {
		for _, fd := range held {
			unix.Close(fd)
		}
		held = nil
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Errorf("restoring the descriptor limit: %v", err)
		}
	}
	probe, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(probe)
	low := old
	low.Cur = uint64(probe) + 64
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	for range 1 << 16 {
		fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.EMFILE) {
			return release
		}
		if err != nil {
			release()
			t.Fatal(err)
		}
		held = append(held, fd)
	}
	release()
	t.Fatal("the descriptor limit never ran out")
	return nil
}

// TestNewClosesFileOnFailure checks that New closes the file it takes
// over when it cannot: the pipe's writer then sees it has no reader.
func TestNewClosesFileOnFailure(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	release := exhaustDescriptors(t)
	_, err = New(r, nil, 0)
	release()
	if err == nil {
		t.Fatal("New succeeded without a descriptor to spare")
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write after New failed: got %v, want EPIPE (the reading end closed)", err)
	}
}

// TestWaitSurvivesDescriptorShortage checks that a read which cannot get
// a duplicate to wait on (the process is out of descriptors) tries again
// rather than fail: the reader must not end for good over a passing
// shortage.
func TestWaitSurvivesDescriptorShortage(t *testing.T) {
	p, w := newTestPipe(t, nil)
	release := exhaustDescriptors(t)
	type result struct {
		n   int
		err error
	}
	got := make(chan result, 1)
	go func() {
		n, err := p.Read(make([]byte, 64))
		got <- result{n, err}
	}()
	select {
	case r := <-got:
		release()
		t.Fatalf("read during the shortage returned %d, %v; want it to wait", r.n, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	if _, err := w.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil || r.n != 6 {
			t.Fatalf("read after the shortage: got %d, %v; want 6, nil", r.n, r.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("after a minute: the read never saw the write")
	}
}

// TestGrowsForFloodOfSmallWrites: a pipe filled by writes of 1000 bytes
// holds less than its size (the kernel fits four in a page, not four and
// a bit), and a discard of it must still count as a flood's and grow the
// pipe, or such a flood drains at a sixteenth of the speed.
func TestGrowsForFloodOfSmallWrites(t *testing.T) {
	tests := []struct {
		write int
	}{{1000}, {2049}, {4096}}
	for _, tt := range tests {
		p, w := newTestPipe(t, nil)
		held := fillPipe(t, w, tt.write)
		if _, err := p.Discard(); err != nil {
			t.Fatalf("discarding %d bytes of %d-byte writes: %v", held, tt.write, err)
		}
		if got := sizeOf(t, p); !grown(got) {
			t.Errorf("after a discard of a pipe full of %d-byte writes (%d bytes): pipe size %d, want %d", tt.write, held, got, pipeSize)
		}
	}
}

// fillPipe writes pieces of size bytes into w until the pipe is full, and
// returns how many bytes it holds.
func fillPipe(t *testing.T, w *os.File, size int) int {
	t.Helper()
	rc, err := w.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	piece := bytes.Repeat([]byte{'x'}, size)
	if err := rc.Control(func(fd uintptr) {
		for range 1 << 16 {
			n, err := unix.Write(int(fd), piece)
			if err != nil {
				return
			}
			held += n
		}
	}); err != nil {
		t.Fatal(err)
	}
	return held
}
