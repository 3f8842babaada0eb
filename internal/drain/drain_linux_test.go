package drain

import (
	"bytes"
	"errors"
	"io"
	"os"
	"runtime"
	"testing"
	"time"
)

// newTestPipe returns a Pipe over a fresh pipe and its writing end.
func newTestPipe(t *testing.T, done <-chan struct{}) (*Pipe, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(r, done, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); w.Close() })
	return p, w
}

// within fails the test if c is not closed within a minute: bounds every
// wait without asserting on timing.
func within(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(time.Minute):
		t.Fatalf("after a minute: %s", what)
	}
}

// TestDiscardCopiesNothing floods a pipe and discards it all: the writer
// completes, every byte is counted as discarded and none was copied into
// the host.
func TestDiscardCopiesNothing(t *testing.T) {
	const writes, size = 64, 256 << 10
	p, w := newTestPipe(t, nil)
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		defer w.Close()
		chunk := bytes.Repeat([]byte{'y'}, size)
		for range writes {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}()
	ended := make(chan struct{})
	var err error
	go func() {
		defer close(ended)
		for err == nil {
			_, err = p.Discard()
		}
	}()
	within(t, wrote, "the writer is still blocked: the discard does not drain the pipe")
	within(t, ended, "the discard did not reach the end of the pipe")
	if !errors.Is(err, io.EOF) {
		t.Errorf("Discard ended with %v, want io.EOF", err)
	}
	if got, want := p.Discarded(), int64(writes*size); got != want || p.Copied() != 0 {
		t.Errorf("discarded %d bytes and copied %d, want %d and 0", got, p.Copied(), want)
	}
}

// TestReadEndsAfterDone: once done is closed, reads after small ones do
// not wait, and the reader sees everything and the end.
func TestReadEndsAfterDone(t *testing.T) {
	done := make(chan struct{})
	close(done)
	p, w := newTestPipe(t, done)
	ended := make(chan struct{})
	var got bytes.Buffer
	go func() {
		defer close(ended)
		_, _ = io.Copy(&got, p)
	}()
	for _, s := range []string{"a", "b", "c"} {
		if _, err := w.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	within(t, ended, "the reader did not see the end of the pipe")
	if got.String() != "abc" {
		t.Errorf("read %q, want %q", got.String(), "abc")
	}
}

// TestCloseEndsWaits: Close ends a read that waits for data no writer
// will send, and every later read fails.
func TestCloseEndsWaits(t *testing.T) {
	p, _ := newTestPipe(t, nil)
	ended := make(chan error, 1)
	go func() {
		_, err := p.Read(make([]byte, 16))
		ended <- err
	}()
	p.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("a read during Close returned %v, want os.ErrClosed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a read still waits a minute after Close")
	}
	if _, err := p.Discard(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Discard after Close = %v, want os.ErrClosed", err)
	}
}

// TestPacing: a sandbox given a core or more is paced at the constants;
// below, the batch stretches with the quota and the pace with its square,
// each up to maxSlowdown.
func TestPacing(t *testing.T) {
	tests := []struct {
		cpus        float64
		batch, pace time.Duration
	}{
		{0, batchTime, paceTime},
		{1, batchTime, paceTime},
		{4, batchTime, paceTime},
		{0.5, 2 * batchTime, 4 * paceTime},
		{0.25, 4 * batchTime, 16 * paceTime},
		{0.2, 5 * batchTime, maxSlowdown * paceTime},
		{0.1, 10 * batchTime, maxSlowdown * paceTime},
		{0.01, maxSlowdown * batchTime, maxSlowdown * paceTime},
	}
	for _, tt := range tests {
		batch, pace := pacing(tt.cpus)
		if batch != tt.batch || pace != tt.pace {
			t.Errorf("pacing(%v) = %v, %v; want %v, %v", tt.cpus, batch, pace, tt.batch, tt.pace)
		}
	}
}

// TestCloseWhileWoken closes Pipes whose reader is waiting just as a write
// wakes it, many times: Close must never wait on a wait that is itself
// waiting for Close's lock (a deadlock seen once in a few dozen interpreter
// shutdowns).
func TestCloseWhileWoken(t *testing.T) {
	const rounds = 2000
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for range rounds {
			r, w, err := os.Pipe()
			if err != nil {
				t.Error(err)
				return
			}
			p, err := New(r, nil, 0)
			if err != nil {
				t.Error(err)
				return
			}
			read := make(chan struct{})
			go func() {
				defer close(read)
				b := make([]byte, 16)
				for {
					if _, err := p.Read(b); err != nil {
						return
					}
				}
			}()
			waitParked(p)
			go func() { _, _ = w.Write([]byte{'x'}) }()
			p.Close()
			<-read
			w.Close()
		}
	}()
	within(t, finished, "Pipes closed while their reader was woken")
}

// waitParked returns once p's reader waits in the poller, or after a
// bounded number of looks.
func waitParked(p *Pipe) {
	for range 100000 {
		p.raw.mu.Lock()
		parked := p.raw.waiting != nil
		p.raw.mu.Unlock()
		if parked {
			return
		}
		runtime.Gosched()
	}
}

// TestSkimSeesEveryByte floods a pipe and skims it to its end: look must
// see every byte once, in order, whatever the pieces.
func TestSkimSeesEveryByte(t *testing.T) {
	const total = 3 << 20
	p, w := newTestPipe(t, nil)
	go func() {
		defer w.Close()
		b := make([]byte, 256<<10)
		for off := 0; off < total; off += len(b) {
			for i := range b {
				b[i] = byte((off + i) % 251)
			}
			if _, err := w.Write(b); err != nil {
				return
			}
		}
	}()
	seen, bad := 0, -1
	look := func(b []byte) {
		for i, c := range b {
			if bad < 0 && c != byte((seen+i)%251) {
				bad = seen + i
			}
		}
		seen += len(b)
	}
	buf := make([]byte, 64<<10)
	var err error
	for range total {
		if err = p.Skim(buf, look); err != nil {
			break
		}
	}
	if !errors.Is(err, io.EOF) || seen != total || bad >= 0 {
		t.Errorf("skimmed %d bytes (first wrong at %d) ending in %v, want %d, none wrong and EOF", seen, bad, err, total)
	}
}
