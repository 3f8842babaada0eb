package workspace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// CopyN copies n bytes from r into dst, as io.CopyN does (fewer only at
// r's end, with io.EOF). When r is an *os.File or a reader Read returned,
// and both are regular files, the bytes are spliced through a pipe
// (kernelCopy; sendfile(2) for a small file or when no pipe can be made): one copy, page
// cache to page cache, in the kernel, where read(2) and write(2) through
// a buffer make two and a system call pair per 32 KiB. That is
// most of a snapshot's, resume's and fork's CPU time
// (BenchmarkSnapshotFiles in internal/sandbox: docs/sessions.md).
// copy_file_range(2) would do better only within one file system, and a
// workspace is a tmpfs of its own, the snapshots on the state directory's
// disk. Other readers, and files the kernel cannot splice, are copied by
// io.CopyN. A Read reader still stops at the size it was opened with.
func CopyN(dst *os.File, r io.Reader, n int64) (int64, error) {
	src, lr := fileOf(r)
	if src == nil || !regular(src) || !regular(dst) {
		return io.CopyN(dst, r, n)
	}
	want := n
	if lr != nil {
		want = min(want, lr.N)
	}
	left := remaining(src)
	sized, err := presize(dst, min(want, left))
	if err != nil {
		return 0, err
	}
	written, err := kernelCopy(dst, src, want, left)
	if lr != nil {
		lr.N -= written
	}
	if errors.Is(err, errNoKernelCopy) {
		written, err = io.CopyN(dst, r, n)
	}
	if written < sized {
		if terr := dst.Truncate(written); terr != nil {
			return written, errors.Join(err, fmt.Errorf("cutting %s to the %d bytes copied: %w", dst.Name(), written, terr))
		}
	}
	switch {
	case err != nil:
		return written, err
	case written < n:
		return written, io.EOF
	}
	return written, nil
}

// presize gives dst, when it is a new empty file not opened to append,
// size bytes (what src holds past its offset, at most the copy's bound)
// before any byte is copied, and says what size it set (0: none). On a
// tmpfs mounted with huge=within_size (a box's scratch:
// rootfs.ScratchHuge) the kernel gives a file 2 MiB pages only where its
// size already covers them, and a copy writes at most one pipe's worth
// (splicePipeSize) at a time, so without this a restored file would get
// none. A size takes no block on any file system; the caller cuts it
// back if fewer bytes come.
func presize(dst *os.File, size int64) (int64, error) {
	if size <= 0 {
		return 0, nil
	}
	var d unix.Stat_t
	if err := unix.Fstat(int(dst.Fd()), &d); err != nil || d.Size != 0 {
		return 0, nil // not new: CopyN's own writes say what is wrong
	}
	if fl, err := unix.FcntlInt(dst.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_APPEND != 0 {
		return 0, nil // appends would go after the size set
	}
	if err := dst.Truncate(size); err != nil {
		return 0, fmt.Errorf("sizing %s to %d bytes: %w", dst.Name(), size, err)
	}
	return size, nil
}

// remaining is how many bytes src holds past its offset now (it may
// still grow or shrink); 0 when that cannot be read, which only makes
// the copy skip presize and take sendfile's path.
func remaining(src *os.File) int64 {
	var s unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &s); err != nil {
		return 0
	}
	off, err := src.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0
	}
	return max(s.Size-off, 0)
}

// fileOf is the file r reads, and the bound on it when r is one of Read's
// readers; nil when r is neither.
func fileOf(r io.Reader) (*os.File, *io.LimitedReader) {
	switch r := r.(type) {
	case *os.File:
		return r, nil
	case *fileReader:
		return r.f, r.r
	}
	return nil, nil
}

// regular says f is a regular file: one that is never in the runtime's
// poller, so its Fd leaves it as it is (a pipe's would turn blocking).
func regular(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode().IsRegular()
}

// errNoKernelCopy says splice(2) or sendfile(2) copied nothing because
// the kernel cannot take these files, so io.CopyN must.
var errNoKernelCopy = errors.New("the kernel cannot copy between these files")

// maxSendfile is the most one sendfile(2) is asked for; the kernel copies
// at most about 2 GiB per call anyway.
const maxSendfile = 1 << 30

// sendfile copies up to n bytes from src's offset to dst's, each offset
// moving on, until src's end. Every call either copies bytes, reaches
// src's end or fails, so the loop ends.
func sendfile(dst, src *os.File, n int64) (int64, error) {
	defer runtime.KeepAlive(dst)
	defer runtime.KeepAlive(src)
	out, in := int(dst.Fd()), int(src.Fd())
	var written int64
	for written < n {
		m, err := unix.Sendfile(out, in, nil, int(min(n-written, maxSendfile)))
		if m > 0 {
			written += int64(m)
		}
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil && written == 0 && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP)):
			return 0, errNoKernelCopy
		case err != nil:
			return written, err
		case m == 0:
			return written, nil
		}
	}
	return written, nil
}
