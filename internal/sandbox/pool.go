package sandbox

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// poolStartTimeout bounds building one pooled sandbox.
const poolStartTimeout = time.Minute

// poolErrorEvery is how often a pool that keeps failing to build says why.
const poolErrorEvery = time.Minute

// refillDelay is how long the pool waits after a box is taken before it
// builds the next.
const refillDelay = 20 * time.Millisecond

// pool keeps sandboxes built ahead from one spec, so a Create that asks
// for exactly that spec skips the build. A background filler replaces
// each one taken; a failing build is retried after a pause.
type pool struct {
	start   startFunc
	discard func(Box, string)
	spec    spec.Spec
	size    int
	// onError is told why a build failed, rate-limited by lastError.
	onError   func(error)
	lastError time.Time

	mu     sync.Mutex
	boxes  []pooled
	closed bool
	want   chan struct{}
	wg     sync.WaitGroup
}

// startFunc builds a box and names its persistent workspace, if any.
type startFunc func(context.Context, spec.Spec) (Box, string, error)

// pooled is a box built ahead and its workspace's name.
type pooled struct {
	box Box
	ws  string
}

func newPool(start startFunc, discard func(Box, string), s spec.Spec, size int, onError func(error)) *pool {
	p := &pool{start: start, discard: discard, spec: s, size: size, onError: onError, want: make(chan struct{}, 1)}
	if size > 0 {
		p.wg.Add(1)
		go p.fill()
		p.wake()
	}
	return p
}

// take returns a ready box built from s and its workspace's name, or a
// nil box when the pool has none.
func (p *pool) take(s spec.Spec) (Box, string) {
	if p.size == 0 || !sameSandbox(s, p.spec) {
		return nil, ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ""
	}
	for len(p.boxes) > 0 {
		b := p.boxes[0]
		p.boxes = p.boxes[1:]
		select {
		case <-b.box.Done():
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.discard(b.box, b.ws)
			}()
			continue
		default:
		}
		p.wake()
		return b.box, b.ws
	}
	p.wake()
	return nil, ""
}

func (p *pool) wake() {
	select {
	case p.want <- struct{}{}:
	default:
	}
}

// fill builds boxes until the pool is full, each time it is woken.
func (p *pool) fill() {
	defer p.wg.Done()
	for range p.want {
		// Building a sandbox forks this process, which stalls its other
		// threads while the page tables are copied: let the request that
		// took a box finish first.
		time.Sleep(refillDelay)
		for p.missing() {
			ctx, cancel := context.WithTimeout(context.Background(), poolStartTimeout)
			b, ws, err := p.start(ctx, p.spec)
			cancel()
			if err != nil {
				p.failed(err)
				time.Sleep(time.Second)
				continue
			}
			if !p.add(pooled{b, ws}) {
				p.discard(b, ws)
				return
			}
		}
	}
}

// failed reports a failed build, unless one was reported within
// poolErrorEvery: a pool that cannot build retries every second, and the
// operator needs the reason once, not a flood.
func (p *pool) failed(err error) {
	if now := time.Now(); p.lastError.IsZero() || now.Sub(p.lastError) >= poolErrorEvery {
		p.lastError = now
		p.onError(fmt.Errorf("building a pooled sandbox (retried every second): %w", err))
	}
}

func (p *pool) missing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed && len(p.boxes) < p.size
}

func (p *pool) add(b pooled) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.boxes = append(p.boxes, b)
	return true
}

// close stops the filler and closes every pooled box.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	boxes := p.boxes
	p.boxes = nil
	p.mu.Unlock()
	if p.size > 0 {
		close(p.want)
		p.wg.Wait()
	}
	for _, b := range boxes {
		p.discard(b.box, b.ws)
	}
}

// sameSandbox says whether a and b build the same sandbox; a nil list and
// an empty one are the same.
func sameSandbox(a, b spec.Spec) bool {
	return a.Limits == b.Limits && a.Root.Template == b.Root.Template && a.Root.Dir == b.Root.Dir && a.Workspace == b.Workspace && a.Scratch == b.Scratch && a.Network.Mode == b.Network.Mode &&
		slices.Equal(a.Network.Allow, b.Network.Allow) && slices.Equal(a.Env, b.Env) && slices.Equal(a.Command, b.Command)
}
