package interp

import (
	"bytes"
	"io"
	"os"
	"sync"
)

// pump reads one of the interpreter's output streams for the process's
// whole life, so the interpreter never blocks on a full pipe, and hands
// what it reads to the running Run's writer until that run's token shows
// up in the stream. Output between runs (a background job still printing)
// belongs to no run and is dropped.
type pump struct {
	r   *os.File
	eof chan struct{} // closed when the stream ends

	mu    sync.Mutex
	sink  io.Writer
	token []byte
	found chan struct{} // closed when token is seen
	pend  []byte        // a tail that may be the start of token
}

// newPump starts reading r. What it reads before the first arm goes to
// sink; a nil sink drops it.
func newPump(r *os.File, sink io.Writer) *pump {
	p := &pump{r: r, eof: make(chan struct{}), sink: sink}
	go p.run()
	return p
}

func (p *pump) run() {
	defer close(p.eof)
	buf := make([]byte, 64<<10)
	for {
		n, err := p.r.Read(buf)
		if n > 0 {
			p.feed(buf[:n])
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
	if p.token == nil {
		p.write(b)
		return
	}
	p.pend = append(p.pend, b...)
	if i := bytes.Index(p.pend, p.token); i >= 0 {
		p.write(p.pend[:i])
		close(p.found)
		p.sink, p.token, p.pend = nil, nil, nil
		return
	}
	keep := partialSuffix(p.pend, p.token)
	p.write(p.pend[:len(p.pend)-keep])
	p.pend = append(p.pend[:0], p.pend[len(p.pend)-keep:]...)
}

// write passes b to the sink; a failing sink is ignored so the stream
// keeps draining.
func (p *pump) write(b []byte) {
	if p.sink != nil && len(b) > 0 {
		_, _ = p.sink.Write(b)
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
