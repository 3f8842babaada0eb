// Package drain reads the output pipes of sandboxed programs at a cost to
// the host that the program cannot drive up. A program that floods its
// output, or writes it one byte at a time, would otherwise make the host
// copy every byte and wake for every write, on CPU that no sandbox's
// cgroup is charged for. A Pipe bounds both: after a short read it waits a
// moment so small writes gather in the pipe (batchTime), and past what the
// caller keeps it throws output away without copying it, at most once per
// paceTime (both stretched for a sandbox given less than a core), while the
// writer simply blocks on its full pipe, which costs nothing: a flood is
// slowed to the pace. Every wait ends early once the writer's program has
// ended, so a quick program's output is read at once.
//
// A Pipe waits for its pipe outside Go's network poller, which would wake
// the process for every single write (see rawPipe on Linux): between two
// of its reads, a write costs the host nothing.
package drain

import (
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// The pace, for a sandbox given at least one core. A sandbox given less
// is paced slower (pacing), so that what its output costs the host
// stays a share of its own CPU quota: on the 2-core VM Warden was measured
// on, one wake of a Go process from a timer cost 0.14 ms of CPU or more (a
// bare 10 ms sleep loop used 13.5 ms a second), which a 0.1-core sandbox
// could not be charged for at one-core rates (docs/interpreters.md,
// "Output").
const (
	// pipeSize is what a Pipe grows its pipe to once a paced read or
	// Discard finds it full (floodRead), so a flood moves in large
	// pieces. Only a flood needs it: every grown pipe counts against its
	// user's fs.pipe-user-pages-soft, even an idle interpreter's.
	pipeSize = 1 << 20
	// floodRead is half the size of a pipe that was never grown (64 KiB):
	// a paced read or Discard that takes as much found the pipe full, a
	// flood. Half, because a full pipe holds less than its size when the
	// writes do not fill its pages: the kernel starts a new page for a
	// write that does not fit in the last one's rest, so 1000-byte writes
	// fill it at 64000 bytes and 2049-byte ones at just over 32 KiB.
	floodRead = 32 << 10
	// smallRead is the read size under which a read counts as small.
	smallRead = 4 << 10
	// batchTime is how long a read waits after two small ones in a row, so
	// that a program writing a byte at a time wakes the host at most 200
	// times a second rather than once per write. The first small read
	// never waits, so a quick program's few lines (or an interpreter's
	// end token right after them) are read at once; output of a program
	// that writes little and often may arrive this late.
	batchTime = 5 * time.Millisecond
	// paceTime is the least time between two reads of output that is
	// thrown away: a flood then costs the host 100 cheap system calls a second,
	// whatever the program's CPU, and output past the limit drains at up
	// to pipeSize per paceTime (100 MiB/s) while the program runs.
	paceTime = 10 * time.Millisecond
	// maxSlowdown bounds the scaling for small quotas (of the pace from
	// 0.22 cores down), so that their output still drains at 5 MiB/s.
	maxSlowdown = 20
)

// pacing returns the batch and pace times for a sandbox given cpus cores:
// the constants at one core or more (or an unknown quota, zero); below,
// the batch stretched by 1/cpus and the pace by 1/cpus², each up to
// maxSlowdown times (the pace from 0.22 cores down, the batch from 0.05).
// The pace takes the square, not the quota's own ratio, because each wake
// costs the host about the same whatever the quota (some 0.2-0.3 ms of
// the Go runtime's own on the 2-core VM): at 0.1 cores, 10 paces a second
// were still a fifth of the tenth of the quota aimed at. Output past the
// limit still drains at 5 MiB/s or more. The batch keeps the quota's own
// ratio: it bounds how fast kept output written in small pieces moves, and
// squared it halved that at half a core (docs/interpreters.md, "Output").
func pacing(cpus float64) (batch, pace time.Duration) {
	batchScale, paceScale := 1.0, 1.0
	if cpus > 0 && cpus < 1 {
		batchScale = min(1/cpus, maxSlowdown)
		paceScale = min(1/(cpus*cpus), maxSlowdown)
	}
	return time.Duration(float64(batchTime) * batchScale), time.Duration(float64(paceTime) * paceScale)
}

// Pipe is the host's reading end of one output pipe. Use it from one
// goroutine; Kick and Close may be called from any.
type Pipe struct {
	raw       *rawPipe
	done      <-chan struct{}
	batch     time.Duration
	pace      time.Duration
	kick      chan struct{}
	stop      chan struct{}
	closing   sync.Once
	timer     *time.Timer
	grown     bool        // the pipe was grown (or failed to grow)
	smalls    int         // small reads in a row, since the last Kick
	fresh     atomic.Bool // Kick was called: smalls starts again
	scratch   []byte
	copied    int64
	discarded int64
}

// New takes over f, the host end of a pipe written by a sandbox given cpus
// cores (zero: unknown): f is closed, whether New fails or not, and the
// Pipe reads the pipe until Close. Waits end at once after done is
// closed: close it when the writing program has ended. A nil done never
// ends them.
func New(f *os.File, done <-chan struct{}, cpus float64) (*Pipe, error) {
	batch, pace := pacing(cpus)
	raw, err := newRawPipe(f, pace)
	if err != nil {
		return nil, err
	}
	return &Pipe{
		raw: raw, done: done, batch: batch, pace: pace,
		kick: make(chan struct{}, 1), stop: make(chan struct{}),
	}, nil
}

// Close ends the Pipe: a read or wait in progress returns os.ErrClosed,
// and so does every later one. Closing a pipe's reading end has no
// failure to report (the kernel frees it whatever happens).
func (p *Pipe) Close() {
	p.closing.Do(func() {
		close(p.stop)
		p.raw.close()
	})
}

// Kick ends the current or next wait early, and starts the count of small
// reads again: call it when the reader must see what is in the pipe now
// (an interpreter's run begins, or has ended and its end token is there).
func (p *Pipe) Kick() {
	p.fresh.Store(true)
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Read reads into b as a file would (io.EOF at the end), first waiting up
// to the batch time (pacing) after two small reads in a row.
func (p *Pipe) Read(b []byte) (int, error) {
	if p.fresh.Swap(false) {
		p.smalls = 0
	}
	if p.smalls >= 2 {
		p.pause(p.batch)
	}
	return p.read(b)
}

// Skim reads output the caller throws away but must still look through
// (an interpreter's end token), at the pace: after waiting up to the pace
// it reads into b, and, if that filled b, the rest of what the pipe holds
// into a large buffer taken from a shared pool only for that read, so an
// idle Pipe holds none. look sees each piece read and must not keep it.
// Skim returns io.EOF at the pipe's end.
func (p *Pipe) Skim(b []byte, look func([]byte)) error {
	n, err := p.readPaced(b)
	look(b[:n])
	if err != nil || n < len(b) {
		return err
	}
	big := skimBuffers.Get().(*[pipeSize]byte)
	defer skimBuffers.Put(big)
	n, err = p.readNow(big[:])
	look(big[:n])
	return err
}

// skimBuffers hold Skim's large reads, up to a full grown pipe.
var skimBuffers = sync.Pool{New: func() any { return new([pipeSize]byte) }}

// readPaced reads into b after waiting up to the pace.
func (p *Pipe) readPaced(b []byte) (int, error) {
	p.pause(p.pace)
	n, err := p.read(b)
	p.grow(int64(n))
	return n, err
}

// readNow reads what the pipe holds now into b, without waiting: 0 bytes
// when it is empty (always, where the system has no read that cannot
// wait).
func (p *Pipe) readNow(b []byte) (int, error) {
	n, err := p.raw.readNow(b)
	p.copied += int64(n)
	return n, err
}

// Discard waits up to the pace, then throws away what the pipe holds without
// copying it (splice to /dev/null where the system has it). It returns how
// many bytes it threw away, and io.EOF at the pipe's end.
func (p *Pipe) Discard() (int64, error) {
	p.pause(p.pace)
	n, err := p.raw.discard(p.stop)
	if errors.Is(err, errors.ErrUnsupported) {
		if p.scratch == nil {
			p.scratch = make([]byte, 64<<10)
		}
		var m int
		m, err = p.raw.read(p.scratch, p.stop)
		p.copied += int64(m)
		n = int64(m)
	}
	p.grow(n)
	p.discarded += n
	return n, err
}

// Copied is how many bytes Read, Skim and Discard copied into this
// process: what the host paid to look at. With Discarded it is the only
// way a caller's tests can see that output past its limit is not copied.
func (p *Pipe) Copied() int64 { return p.copied }

// Discarded is how many bytes Discard threw away, copied or not.
func (p *Pipe) Discarded() int64 { return p.discarded }

// grow grows the pipe to pipeSize the first time a paced read of n bytes
// finds it full. A pipe that cannot grow (its user is past
// fs.pipe-user-pages-soft, or the system's pipe-max-size is lower) still
// works, its writer blocking sooner at the same pace, so the failure is
// only logged, once per process.
func (p *Pipe) grow(n int64) {
	if p.grown || n < floodRead {
		return
	}
	p.grown = true
	if err := p.raw.grow(); err != nil {
		growFailure.Do(func() {
			slog.Warn("output of sandboxes past their limit drains slower", "err", err)
		})
	}
}

// growFailure logs the first pipe that could not grow.
var growFailure sync.Once

func (p *Pipe) read(b []byte) (int, error) {
	n, err := p.raw.read(b, p.stop)
	p.copied += int64(n)
	if n < smallRead {
		p.smalls++
	} else {
		p.smalls = 0
	}
	return n, err
}

// pause waits d, or less when the program has ended, Kick was called or
// the Pipe is closing.
func (p *Pipe) pause(d time.Duration) {
	select {
	case <-p.done:
		return
	case <-p.kick:
		return
	case <-p.stop:
		return
	default:
	}
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d)
	}
	select {
	case <-p.timer.C:
	case <-p.done:
		p.timer.Stop()
	case <-p.kick:
		p.timer.Stop()
	case <-p.stop:
		p.timer.Stop()
	}
}
