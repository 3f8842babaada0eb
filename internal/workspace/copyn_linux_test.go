package workspace

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestCopyN copies from each kind of reader CopyN knows (a file and a
// Read reader, through sendfile; a pipe and a plain reader, through
// io.CopyN) and into a file sendfile refuses (O_APPEND), short of,
// exactly at and past the source's end: the bytes and count of io.CopyN
// every time.
func TestCopyN(t *testing.T) {
	data := make([]byte, 300<<10) // several of io.Copy's buffers
	rand.Read(data)
	size := int64(len(data))
	dir := t.TempDir()
	srcPath := filepath.Join(dir, "src")
	if err := os.WriteFile(srcPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, os.Geteuid(), os.Getegid(), Limits{})
	writeFile(t, filepath.Join(e.ws, "src"), string(data), 0o644)
	sources := []struct {
		name string
		open func(t *testing.T) io.Reader
	}{
		{"file", func(t *testing.T) io.Reader { return openT(t, srcPath) }},
		{"Read reader", func(t *testing.T) io.Reader {
			rc, _, err := e.d.Read("src")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rc.Close() })
			return rc
		}},
		{"pipe", func(t *testing.T) io.Reader { return pipeT(t, data) }},
		{"plain reader", func(t *testing.T) io.Reader { return bytes.NewReader(data) }},
	}
	for _, src := range sources {
		for _, appendMode := range []bool{false, true} {
			for _, n := range []int64{0, 1, size - 1, size, size + 1} {
				r := src.open(t)
				dst := createT(t, filepath.Join(t.TempDir(), "dst"), appendMode)
				got, err := CopyN(dst, r, n)
				want, wantErr := min(n, size), error(nil)
				if n > size {
					wantErr = io.EOF
				}
				if got != want || !errors.Is(err, wantErr) {
					t.Errorf("%s, append %v: CopyN(%d) = %d, %v; want %d, %v", src.name, appendMode, n, got, err, want, wantErr)
				}
				if content := readT(t, dst.Name()); !bytes.Equal(content, data[:want]) {
					t.Errorf("%s, append %v: CopyN(%d) wrote %d bytes, not the first %d of the source", src.name, appendMode, n, len(content), want)
				}
				// What is left is read on from where the copy stopped.
				rest, err := io.ReadAll(r)
				if err != nil || !bytes.Equal(rest, data[want:]) {
					t.Errorf("%s, append %v: after CopyN(%d) the reader gave %d bytes, %v; want the last %d", src.name, appendMode, n, len(rest), err, size-want)
				}
			}
		}
	}
}

// TestCopyNStopsAtOpenSize: a Read reader of a file the sandbox grows
// after the open copies what the file held at the open, through sendfile
// as through Read.
func TestCopyNStopsAtOpenSize(t *testing.T) {
	e := newEnv(t, os.Geteuid(), os.Getegid(), Limits{})
	rc := e.readGrown(t)
	dst := createT(t, filepath.Join(t.TempDir(), "dst"), false)
	n, err := CopyN(dst, rc, 100)
	if got := readT(t, dst.Name()); n != 3 || !errors.Is(err, io.EOF) || string(got) != "abc" {
		t.Errorf("CopyN of a file grown after open = %d %q, %v; want 3 \"abc\", EOF", n, got, err)
	}
}

// TestWriteFromFile: Write from a file (the kernel's copy) keeps its
// limit: a file of the limit is written, one a byte over is ErrTooLarge
// and leaves nothing behind.
func TestWriteFromFile(t *testing.T) {
	forEachIdentity(t, Limits{MaxFileBytes: 100 << 10}, func(t *testing.T, e *env) {
		dir := t.TempDir()
		tests := []struct {
			size int
			want error
		}{
			{size: 0},
			{size: 100 << 10},
			{size: 100<<10 + 1, want: ErrTooLarge},
		}
		for _, tt := range tests {
			data := make([]byte, tt.size)
			rand.Read(data)
			src := filepath.Join(dir, "src")
			if err := os.WriteFile(src, data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := e.d.Write("f", openT(t, src), 0o600)
			wantErr(t, fmt.Sprintf("Write of a file of %d bytes", tt.size), err, tt.want)
			if tt.want == nil {
				if got, _, err := readAll(t, e.d, "f"); err != nil || !bytes.Equal(got, data) {
					t.Errorf("Read after a Write of %d bytes from a file: %d bytes, %v; want them all", tt.size, len(got), err)
				}
			}
		}
		checkNames(t, e.ws, "f")
	})
}

// TestSendfile: the kernel's copy itself, which CopyN falls back from
// silently, works between the file systems Warden copies across (a
// session's tmpfs and the state directory's): it copies every byte with
// no error, so CopyN really takes it.
func TestSendfile(t *testing.T) {
	tmpfs, disk := testhost.Tmpfs(t, "4m"), t.TempDir()
	tests := []struct {
		name     string
		from, to string
		size     int
	}{
		{"tmpfs to disk", tmpfs, disk, 1 << 20},
		{"disk to tmpfs", disk, tmpfs, 1 << 20},
		{"tmpfs to disk, empty", tmpfs, disk, 0},
	}
	for i, tt := range tests {
		data := make([]byte, tt.size)
		rand.Read(data)
		srcPath := filepath.Join(tt.from, fmt.Sprintf("src%d", i))
		if err := os.WriteFile(srcPath, data, 0o600); err != nil {
			t.Fatal(err)
		}
		dst := createT(t, filepath.Join(tt.to, fmt.Sprintf("dst%d", i)), false)
		got, err := sendfile(dst, openT(t, srcPath), int64(tt.size))
		if got != int64(tt.size) || err != nil {
			t.Errorf("%s: sendfile of %d bytes = %d, %v; want %d, nil", tt.name, tt.size, got, err, tt.size)
		}
		if content := readT(t, dst.Name()); !bytes.Equal(content, data) {
			t.Errorf("%s: sendfile wrote %d bytes, not the source's %d", tt.name, len(content), tt.size)
		}
	}
}

// TestCopyNPipeStaysNonblocking: CopyN from a pipe copies through
// io.CopyN without calling its Fd, which would turn it blocking and take
// it off Go's poller (a read from the sandbox could then hold a thread).
func TestCopyNPipeStaysNonblocking(t *testing.T) {
	data := []byte("from the pipe")
	r := pipeT(t, data)
	dst := createT(t, filepath.Join(t.TempDir(), "dst"), false)
	if n, err := CopyN(dst, r, int64(len(data))); n != int64(len(data)) || err != nil {
		t.Fatalf("CopyN from a pipe = %d, %v; want %d, nil", n, err, len(data))
	}
	sc, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	var flagsErr error
	if err := sc.Control(func(fd uintptr) { flags, flagsErr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil || flagsErr != nil {
		t.Fatalf("reading the pipe's flags: %v, %v", err, flagsErr)
	}
	if flags&unix.O_NONBLOCK == 0 {
		t.Errorf("after CopyN the pipe's flags are %#x, without O_NONBLOCK; want it kept", flags)
	}
}

func openT(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func createT(t *testing.T, p string, appendMode bool) *os.File {
	t.Helper()
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if appendMode {
		flags |= os.O_APPEND
	}
	f, err := os.OpenFile(p, flags, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func readT(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pipeT is a pipe's reading end that yields data, then its end.
func pipeT(t *testing.T, data []byte) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	go func() {
		_, _ = w.Write(data)
		w.Close()
	}()
	return r
}

// TestWriteFromFileFull: a Write from a file (the kernel's copy) into a
// workspace whose tmpfs is full stops at the tmpfs's size, as a
// session's --disk does, says so with ErrNoSpace and leaves nothing
// behind.
func TestWriteFromFileFull(t *testing.T) {
	ws := testhost.Tmpfs(t, "64k")
	d, err := Open(ws, os.Geteuid(), os.Getegid(), Limits{MaxFileBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, make([]byte, 256<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = d.Write("big", openT(t, src), 0o644)
	wantErr(t, "Write of 256 KiB from a file into a 64 KiB tmpfs", err, ErrNoSpace)
	checkNames(t, ws)
}

// TestPresize: a new file opened to write is sized to what the copy will
// bring (so that a huge-page tmpfs gives it huge pages) and nothing else
// is: not a file that holds bytes, nor one opened to append.
func TestPresize(t *testing.T) {
	dir := t.TempDir()
	srcPath := filepath.Join(dir, "src")
	if err := os.WriteFile(srcPath, make([]byte, 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		skip, n    int64
		appendMode bool
		held       string
		want       int64
	}{
		{"whole file", 0, 5000, false, "", 1000},
		{"bounded by n", 0, 300, false, "", 300},
		{"from the source's offset", 400, 5000, false, "", 600},
		{"source at its end", 1000, 5000, false, "", 0},
		{"destination holds bytes", 0, 5000, false, "x", 0},
		{"destination appends", 0, 5000, true, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := openT(t, srcPath)
			if _, err := src.Seek(tt.skip, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			dst := createT(t, filepath.Join(t.TempDir(), "dst"), tt.appendMode)
			if _, err := dst.WriteString(tt.held); err != nil {
				t.Fatal(err)
			}
			got, err := presize(dst, min(tt.n, remaining(src)))
			if err != nil || got != tt.want {
				t.Errorf("presize(n=%d) = %d, %v; want %d, nil", tt.n, got, err, tt.want)
			}
			st, err := dst.Stat()
			if err != nil {
				t.Fatal(err)
			}
			if wantSize := max(tt.want, int64(len(tt.held))); st.Size() != wantSize {
				t.Errorf("presize(n=%d) left the destination %d bytes long, want %d", tt.n, st.Size(), wantSize)
			}
		})
	}
}

// TestKernelCopy splices between a tmpfs and the disk, both ways, sizes
// around the pipe's, from an offset not on a page's start (the pipe is
// full with fewer than its size in bytes), a small file (sendfile), and
// gives a destination that refuses splices (O_APPEND) back to io.CopyN
// with the source's offset where it was. Each copy is bounded: a copy
// that blocks fails the test instead of hanging it.
func TestKernelCopy(t *testing.T) {
	tmpfs, disk := testhost.Tmpfs(t, "16m"), t.TempDir()
	tests := []struct {
		name       string
		from, to   string
		size, skip int
		appendMode bool
	}{
		{"tmpfs to disk", tmpfs, disk, 3*splicePipeSize + 7, 0, false},
		{"disk to tmpfs", disk, tmpfs, 3*splicePipeSize + 7, 0, false},
		{"one pipe's worth", disk, tmpfs, splicePipeSize, 0, false},
		{"one byte past a pipe", disk, tmpfs, splicePipeSize + 1, 0, false},
		{"unaligned start on disk", disk, tmpfs, 3 * splicePipeSize, 100, false},
		{"unaligned start on tmpfs", tmpfs, disk, 3 * splicePipeSize, 4095, false},
		{"small file", disk, tmpfs, smallCopy, 0, false},
		{"empty", tmpfs, disk, 0, 0, false},
		{"destination refuses", disk, tmpfs, splicePipeSize + 1, 0, true},
	}
	for i, tt := range tests {
		data := make([]byte, tt.size)
		rand.Read(data)
		srcPath := filepath.Join(tt.from, fmt.Sprintf("src%d", i))
		if err := os.WriteFile(srcPath, data, 0o600); err != nil {
			t.Fatal(err)
		}
		src := openT(t, srcPath)
		if _, err := src.Seek(int64(tt.skip), io.SeekStart); err != nil {
			t.Fatal(err)
		}
		dst := createT(t, filepath.Join(tt.to, fmt.Sprintf("dst%d", i)), tt.appendMode)
		var got int64
		var err error
		bounded(t, tt.name, func() { got, err = kernelCopy(dst, src, int64(tt.size)+100, remaining(src)) })
		if tt.appendMode {
			off, serr := src.Seek(0, io.SeekCurrent)
			if got != 0 || !errors.Is(err, errNoKernelCopy) || off != 0 || serr != nil {
				t.Errorf("%s: kernelCopy = %d, %v with the source at %d (%v); want 0, errNoKernelCopy at 0", tt.name, got, err, off, serr)
			}
			continue
		}
		want := data[tt.skip:]
		if got != int64(len(want)) || err != nil {
			t.Errorf("%s: kernelCopy of %d bytes = %d, %v; want %d, nil", tt.name, len(want), got, err, len(want))
		}
		if content := readT(t, dst.Name()); !bytes.Equal(content, want) {
			t.Errorf("%s: kernelCopy wrote %d bytes, not the source's %d", tt.name, len(content), len(want))
		}
	}
}

// TestFillHostileSource drives fill and drain as splice does while the
// source changes under the copy: a short read at the source's end, then
// the source grows (the next read starts mid-page, so the pipe fills
// with fewer than its size in bytes), and a source cut short mid-copy.
// Each must return, not wait on a pipe only the same copy drains.
func TestFillHostileSource(t *testing.T) {
	t.Run("short read then growth", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "src")
		data := make([]byte, 100+2*splicePipeSize)
		rand.Read(data)
		if err := os.WriteFile(path, data[:100], 0o600); err != nil {
			t.Fatal(err)
		}
		src := openT(t, path)
		r, w, size := pipeSized(t, splicePipeSize)
		var held, more int
		var end, moreEnd bool
		var err, moreErr error
		bounded(t, "fill of a growing source", func() {
			held, end, err = fill(int(src.Fd()), w, size)
			if err != nil {
				return
			}
			if werr := os.WriteFile(path, data, 0o600); werr != nil {
				err = werr
				return
			}
			more, moreEnd, moreErr = fill(int(src.Fd()), w, size-held)
		})
		if held != 100 || !end || err != nil {
			t.Fatalf("fill of a 100-byte source = %d, %v, %v; want 100, true, nil", held, end, err)
		}
		if moreErr != nil || moreEnd || more <= 0 || held+more > size {
			t.Fatalf("fill after growth = %d, %v, %v; want 0 < n <= %d, false, nil", more, moreEnd, moreErr, size-held)
		}
		dst := createT(t, filepath.Join(t.TempDir(), "dst"), false)
		var got int64
		bounded(t, "drain", func() { got, err = drain(r, int(dst.Fd()), held+more) })
		if got != int64(held+more) || err != nil {
			t.Fatalf("drain of %d bytes = %d, %v; want %d, nil", held+more, got, err, held+more)
		}
		if content := readT(t, dst.Name()); !bytes.Equal(content, data[:held+more]) {
			t.Errorf("drain wrote %d bytes that differ from the source's first %d", len(content), held+more)
		}
	})
	t.Run("truncated mid-copy", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "src")
		if err := os.WriteFile(path, make([]byte, 3*splicePipeSize), 0o600); err != nil {
			t.Fatal(err)
		}
		src := openT(t, path)
		dst := createT(t, filepath.Join(t.TempDir(), "dst"), false)
		r, w, size := pipeSized(t, splicePipeSize)
		var held, after int
		var end bool
		var got int64
		var err, ferr, derr error
		bounded(t, "copy of a source cut short", func() {
			if held, _, err = fill(int(src.Fd()), w, size); err != nil {
				return
			}
			if err = os.Truncate(path, splicePipeSize/2); err != nil {
				return
			}
			got, derr = drain(r, int(dst.Fd()), held)
			after, end, ferr = fill(int(src.Fd()), w, size)
		})
		if err != nil || held == 0 {
			t.Fatalf("fill before the cut = %d, %v; want bytes, nil", held, err)
		}
		if after != 0 || !end || ferr != nil {
			t.Errorf("fill past the cut = %d, %v, %v; want 0, true, nil", after, end, ferr)
		}
		if derr == nil && got != int64(held) {
			t.Errorf("drain of %d bytes = %d, nil; want all of them or an error", held, got)
		}
	})
}

// pipeSized is a non-blocking pipe as kernelCopy makes one, of about
// want bytes.
func pipeSized(t *testing.T, want int64) (r, w, size int) {
	t.Helper()
	r, w, size, err := newPipe(want)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Close(r)
		unix.Close(w)
	})
	return r, w, size
}

// hangBound is how long bounded waits for a copy before failing the
// test: not a speed claim (a copy here takes milliseconds), only a bound
// so that a copy blocked in the kernel fails instead of hanging the run.
const hangBound = 2 * time.Minute

// bounded runs f, failing the test when it has not returned within
// hangBound; f's goroutine is then left blocked, so the test stops at
// once rather than touching what f still uses.
func bounded(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(hangBound):
		t.Fatalf("%s still blocked after %v: the copy waits for ever", what, hangBound)
	}
}
