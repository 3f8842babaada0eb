package interp

import (
	"bytes"
	"io"
	"os"
	"sync"

	"github.com/warden-sandbox/warden/internal/drain"
)

// pump reads one of the interpreter's output streams for the process's
// whole life, so the interpreter never blocks for good on a full pipe,
// and hands what it reads to the running Run's writer until that run's
// token shows up in the stream. Output between runs (a background job
// still printing) belongs to no run and is dropped. Output nobody keeps
// (between runs, or once the run's writer is Full) is read only to find
// the token, in large pieces at the sandbox's pace (see package drain), so a
// flood costs the host little: the interpreter waits on its full pipe
// between reads.
type pump struct {
	pipe *drain.Pipe
	eof  chan struct{} // closed when the stream ends
	// readKeeping counts the bytes read while a sink kept them, the rest
	// having been skimmed at the pace: the run goroutine's alone. It is
	// kept for the tests, the only way they can see that a pump past a
	// full sink reads at the pace.
	readKeeping int64

	mu    sync.Mutex
	sink  io.Writer
	token []byte
	found chan struct{} // closed when token is seen
	pend  []byte        // a tail that may be the start of token
}

// pumpChunk is the most one read of kept output takes.
const pumpChunk = 64 << 10

// newPump starts reading r, which it takes over (see drain.New); close
// the pump to end it. What it reads before the first arm goes to sink; a
// nil sink drops it. Waits end early once exited is closed; cpus is the
// sandbox's CPU quota, which sets the pace (zero: unknown).
func newPump(r *os.File, sink io.Writer, exited <-chan struct{}, cpus float64) (*pump, error) {
	pipe, err := drain.New(r, exited, cpus)
	if err != nil {
		return nil, err
	}
	p := &pump{pipe: pipe, eof: make(chan struct{}), sink: sink}
	go p.run()
	return p, nil
}

// close ends the pump and releases its pipe.
func (p *pump) close() { p.pipe.Close() }

func (p *pump) run() {
	defer close(p.eof)
	buf := make([]byte, pumpChunk)
	for {
		var err error
		if p.keeping() {
			var n int
			n, err = p.pipe.Read(buf)
			p.readKeeping += int64(n)
			p.feed(buf[:n])
		} else {
			err = p.pipe.Skim(buf, p.feed)
		}
		if err != nil {
			p.mu.Lock()
			p.write(p.pend)
			p.pend = nil
			p.mu.Unlock()
			return
		}
	}
}

// keeping says whether anyone keeps what the stream holds now: a sink that
// is not Full.
func (p *pump) keeping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sink == nil {
		return false
	}
	f, ok := p.sink.(interface{ Full() bool })
	return !ok || !f.Full()
}

// hurry ends the pump's current wait: the run's token is in the pipe.
func (p *pump) hurry() { p.pipe.Kick() }

// arm starts a run: output goes to sink until token, and the returned
// channel is closed when token has been read. An empty token passes
// everything to sink until disarm.
func (p *pump) arm(token string, sink io.Writer) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sink, p.token, p.pend = sink, nil, nil
	if token != "" {
		p.token = []byte(token)
	}
	p.found = make(chan struct{})
	p.pipe.Kick()
	return p.found
}

// disarm ends a run: nothing more is written to its sink.
func (p *pump) disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sink, p.token, p.pend = nil, nil, nil
}

func (p *pump) feed(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case len(b) == 0:
	case p.token == nil:
		p.write(b)
	case len(b) < len(p.token):
		p.feedShort(b)
	default:
		p.feedLong(b)
	}
}

// feedShort looks for the token in pend and b together.
func (p *pump) feedShort(b []byte) {
	p.pend = append(p.pend, b...)
	if i := bytes.Index(p.pend, p.token); i >= 0 {
		p.write(p.pend[:i])
		p.foundToken()
		return
	}
	keep := partialSuffix(p.pend, p.token)
	p.write(p.pend[:len(p.pend)-keep])
	p.pend = append(p.pend[:0], p.pend[len(p.pend)-keep:]...)
}

// feedLong looks for the token in b, which is at least as long as the
// token, without copying b: first a token that starts in pend, then one
// within b.
func (p *pump) feedLong(b []byte) {
	if n := len(p.pend); n > 0 {
		joined := append(p.pend, b[:len(p.token)-1]...)
		if i := bytes.Index(joined, p.token); i >= 0 && i < n {
			p.write(joined[:i])
			p.foundToken()
			return
		}
		p.write(joined[:n])
		p.pend = p.pend[:0]
	}
	if i := bytes.Index(b, p.token); i >= 0 {
		p.write(b[:i])
		p.foundToken()
		return
	}
	keep := partialSuffix(b, p.token)
	p.write(b[:len(b)-keep])
	p.pend = append(p.pend, b[len(b)-keep:]...)
}

// foundToken ends the run's stream.
func (p *pump) foundToken() {
	close(p.found)
	p.sink, p.token, p.pend = nil, nil, nil
}

// write passes b to the sink; a failing sink is ignored so the stream
// keeps draining.
func (p *pump) write(b []byte) {
	if p.sink != nil && len(b) > 0 {
		_, _ = p.sink.Write(b) // see above: the stream must keep draining
	}
}

// partialSuffix returns the length of the longest suffix of b that is a
// proper prefix of token: bytes that must wait for the next read to tell
// whether they start the token.
func partialSuffix(b, token []byte) int {
	n := min(len(b), len(token)-1)
	for ; n > 0; n-- {
		if bytes.HasPrefix(token, b[len(b)-n:]) {
			return n
		}
	}
	return 0
}
