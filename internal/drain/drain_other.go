//go:build !linux

package drain

import (
	"errors"
	"os"
	"time"
)

// rawPipe reads through the os.File where pipes cannot be kept out of the
// runtime's poller; only Linux runs sandboxes.
type rawPipe struct{ f *os.File }

func newRawPipe(f *os.File, _ time.Duration) (*rawPipe, error) { return &rawPipe{f: f}, nil }

// grow has nothing to do: the pipe keeps the system's size.
func (r *rawPipe) grow() error { return nil }

func (r *rawPipe) read(b []byte, _ <-chan struct{}) (int, error) { return r.f.Read(b) }

// readNow reads nothing: without a read that cannot wait it cannot tell
// whether the pipe holds data, and readNow must not wait. The caller's
// next read takes what is there.
func (r *rawPipe) readNow([]byte) (int, error) { return 0, nil }

// discard is unsupported: without splice the caller reads instead.
func (r *rawPipe) discard(<-chan struct{}) (int64, error) { return 0, errors.ErrUnsupported }

// close closes the file; a pipe's close has nothing to report.
func (r *rawPipe) close() { _ = r.f.Close() }
