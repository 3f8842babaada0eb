package workspace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// splicePipeSize is the pipe a copy splices through: the most an
// unprivileged process may ask for (fs.pipe-max-size's default). Each
// write into dst is one pipe's worth, and a tmpfs with huge pages
// (rootfs.ScratchHuge) zeroes the rest of a new 2 MiB page on the first
// write into it: sendfile's own 64 KiB pipe made that zeroing more than
// half of a restore's CPU time (perf), a 1 MiB pipe halves it.
const splicePipeSize = 1 << 20

// kernelCopy copies up to n bytes from src's offset to dst's, each offset
// moving on, until src's end, in the kernel: through a pipe of up to
// splicePipeSize with splice(2), or by sendfile(2) when the source holds
// at most a default pipe's worth (left: its bytes past the offset; a
// pipe of its own costs more system calls than such a file's copy) or
// when no pipe can be made (descriptors run out). errNoKernelCopy says
// nothing was copied because the files cannot be spliced.
func kernelCopy(dst, src *os.File, n, left int64) (int64, error) {
	if min(n, left) <= smallCopy {
		return sendfile(dst, src, n)
	}
	r, w, size, err := newPipe(min(n, left))
	if err != nil {
		return sendfile(dst, src, n)
	}
	defer unix.Close(r)
	defer unix.Close(w)
	return splice(dst, src, r, w, size, n)
}

// smallCopy is a pipe's default size: a copy of at most this much goes
// through sendfile(2), whose pipe the kernel keeps for the thread.
const smallCopy = 64 << 10

// newPipe makes a non-blocking pipe (r, w) for a copy of want bytes, of
// size bytes: want rounded up to a page, at most splicePipeSize. It is
// non-blocking so that a splice into it never waits for room that only
// the same copy would make (fill).
func newPipe(want int64) (r, w, size int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return 0, 0, 0, fmt.Errorf("making a pipe to splice through: %w", err)
	}
	size = smallCopy
	pages := (want + int64(os.Getpagesize()) - 1) / int64(os.Getpagesize())
	if ask := int(min(pages*int64(os.Getpagesize()), splicePipeSize)); ask > size {
		if got, err := unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, ask); err == nil {
			size = got // a larger pipe is only faster, so a refusal keeps the default
		}
	}
	return p[0], p[1], size, nil
}

// splice is kernelCopy through the pipe (r, w) of size bytes. The pipe
// is filled, then drained into dst whole, so each write is one pipe's
// worth. Bytes taken from src that dst refuses are given back to src's
// offset, so that io.CopyN can take over after errNoKernelCopy.
func splice(dst, src *os.File, r, w, size int, n int64) (int64, error) {
	defer runtime.KeepAlive(dst)
	defer runtime.KeepAlive(src)
	out, in := int(dst.Fd()), int(src.Fd())
	var written int64
	for written < n {
		held, end, err := fill(in, w, int(min(n-written, int64(size))))
		if err != nil && written == 0 && held == 0 && unspliceable(err) {
			return 0, errNoKernelCopy
		}
		if err != nil {
			return written, errors.Join(err, giveBack(src, r, held))
		}
		m, err := drain(r, out, held)
		written += m
		if err != nil {
			if written == 0 && unspliceable(err) {
				if gerr := giveBack(src, r, held); gerr != nil {
					return 0, errors.Join(err, gerr)
				}
				return 0, errNoKernelCopy
			}
			return written, errors.Join(err, giveBack(src, r, held-int(m)))
		}
		if end {
			break
		}
	}
	return written, nil
}

// fill splices up to want bytes from in into the non-blocking pipe w,
// saying how many it holds and whether in ended first. It stops early
// when the pipe is full (EAGAIN): a file-to-pipe splice takes one of the
// pipe's slots per page, a whole one even for part of a page (a source
// offset not on a page's start, or a short read at the source's end
// before it grew), so the pipe can be full with fewer than its size in
// bytes. Each call adds bytes, ends or fails, so the loop ends.
func fill(in, w, want int) (held int, end bool, err error) {
	for held < want {
		m, err := unix.Splice(in, nil, w, nil, want-held, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN) && held > 0:
			return held, false, nil // full: the caller drains it
		case errors.Is(err, unix.EAGAIN):
			return 0, false, fmt.Errorf("splicing from the file: the pipe takes nothing: %w", err)
		case err != nil:
			return held, false, fmt.Errorf("splicing from the file: %w", err)
		case m == 0:
			return held, true, nil
		}
		held += int(m)
	}
	return held, false, nil
}

// drain splices held bytes from the pipe r into out. The pipe holds
// them, so it never waits for the pipe; EAGAIN (held was wrong) is an
// error, not a wait.
func drain(r, out, held int) (int64, error) {
	var done int64
	for int(done) < held {
		m, err := unix.Splice(r, nil, out, nil, held-int(done), unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return done, fmt.Errorf("splicing into the file: %w", err)
		case m == 0:
			return done, fmt.Errorf("splicing into the file: %w", io.ErrShortWrite)
		}
		done += m
	}
	return done, nil
}

// giveBack moves src's offset back over the held bytes still in the
// pipe r (they were read from src but not written), so that the bytes
// copied and src's offset agree, as after any short copy.
func giveBack(src *os.File, r, held int) error {
	if held <= 0 {
		return nil
	}
	if _, err := src.Seek(-int64(held), io.SeekCurrent); err != nil {
		return fmt.Errorf("moving %s back over %d bytes not copied: %w", src.Name(), held, err)
	}
	return nil
}

// unspliceable says err is the kernel refusing to splice these files.
func unspliceable(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP)
}
