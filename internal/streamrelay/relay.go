package streamrelay

import (
	"io"
	"os"

	"github.com/warden-sandbox/warden/internal/streammux"
)

// Buffer is a relay's buffer: one full data frame.
const Buffer = 32 << 10

// ToChannel copies r (a pipe's read end) to ch until r ends, then closes
// both: the peer reads end of file. A peer that reads no more (its Write
// fails with streammux.ErrStopped) ends the copy early, and closing r
// then gives the pipe's writer EPIPE, as a reader gone would.
func ToChannel(ch *streammux.Channel, r *os.File) {
	copyClose(ch, r, ch, r)
}

// FromChannel copies ch to w (a pipe's write end) until the peer closes
// its side, then closes both: w's reader reads end of file. A write to w
// that fails (its reader gone: EPIPE) ends the copy early, and closing
// ch then sends a stop, so the peer's writes fail too.
func FromChannel(w *os.File, ch *streammux.Channel) {
	copyClose(w, ch, ch, w)
}

// copyClose copies src to dst with one buffer, then closes ch and f,
// whichever way the copy ended.
func copyClose(dst io.Writer, src io.Reader, ch *streammux.Channel, f *os.File) {
	buf := make([]byte, Buffer)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	// Either end may be closed already (a session that ended, or a
	// process whose relays are cut); there is nothing left to report to.
	_ = f.Close()
	_ = ch.Close() // as above: closed already, or nobody to tell
}
