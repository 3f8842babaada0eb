package egress

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// errByteLimit ends a transfer at the attachment's byte limit.
var errByteLimit = errors.New("byte limit reached")

// copyBufSize is large so that a loopback transfer costs few syscalls;
// see BenchmarkThroughput.
const copyBufSize = 256 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// meters counts the bytes one connection moved each way.
type meters struct{ up, down atomic.Int64 }

// pump copies src to dst until EOF, charging every byte to the
// attachment's budget and to n. At the limit it writes what the budget
// allows and returns errByteLimit. Bytes are copied through a buffer
// rather than spliced, because splice(2) from TCP to a unix socket cannot
// stop at a byte count.
func (a *Attachment) pump(dst io.Writer, src io.Reader, n *atomic.Int64) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		k, rerr := src.Read(buf)
		if k > 0 {
			ok := a.take(k)
			w, werr := dst.Write(buf[:ok])
			n.Add(int64(w))
			switch {
			case werr != nil:
				return werr
			case ok < k:
				return errByteLimit
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// meterReader charges what it reads to the attachment's budget.
type meterReader struct {
	a *Attachment
	r io.Reader
	n *atomic.Int64
}

func (m *meterReader) Read(p []byte) (int, error) {
	k, err := m.r.Read(p)
	ok := m.a.take(k)
	m.n.Add(int64(ok))
	if ok < k {
		return ok, errByteLimit
	}
	return k, err
}

// meterWriter charges what it writes to the attachment's budget.
type meterWriter struct {
	a *Attachment
	w io.Writer
	n *atomic.Int64
}

func (m *meterWriter) Write(p []byte) (int, error) {
	ok := m.a.take(len(p))
	k, err := m.w.Write(p[:ok])
	m.n.Add(int64(k))
	if err == nil && ok < len(p) {
		err = errByteLimit
	}
	return k, err
}

// spliceChunk is how much of the byte budget a spliced copy takes at a
// time; what it does not use goes back.
const spliceChunk = 4 << 20

// copy moves src to dst like pump, but between two TCP connections (a
// handed-over sandbox connection and the origin) it lets the kernel
// splice the bytes, in chunks the budget allows, instead of copying them
// through this process: the download path's cost then is that of one hop.
func (a *Attachment) copy(dst io.Writer, src io.Reader, n *atomic.Int64) error {
	d, ok1 := dst.(*net.TCPConn)
	s, ok2 := src.(*net.TCPConn)
	if !ok1 || !ok2 {
		return a.pump(dst, src, n)
	}
	for {
		k := a.take(spliceChunk)
		if k == 0 {
			return errByteLimit
		}
		w, err := io.Copy(d, io.LimitReader(s, int64(k)))
		n.Add(w)
		a.used.Add(w - int64(k))
		if err != nil {
			return err
		}
		if w < int64(k) {
			return nil // src reached EOF
		}
	}
}
