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

// missPoll is how often the filler looks whether the runs and creates
// that found the pool empty have ended.
const missPoll = 20 * time.Millisecond

// missHold bounds how long the misses in flight hold the refill back
// after the latest of them: a burst misses again and again, while one
// long run that missed must not keep the pool empty for its whole life.
const missHold = time.Second

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
	// misses counts the takes that found no ready box and whose own
	// build (a create's) or run (a one-shot's) has not ended: while any
	// has not, the filler waits (see waitQuiet), for missHold after
	// lastMiss at most.
	misses   int
	lastMiss time.Time
	want     chan struct{}
	wg       sync.WaitGroup
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
// nil box when the pool has none. ended is never nil: the caller calls it
// once what it does instead of using a pooled box (its own build, or its
// one-shot run) has ended.
func (p *pool) take(s spec.Spec) (box Box, ws string, ended func()) {
	if p.size == 0 || !sameSandbox(s, p.spec) {
		return nil, "", func() {}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, "", func() {}
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
		return b.box, b.ws, func() {}
	}
	p.misses++
	p.lastMiss = time.Now()
	p.wake()
	return nil, "", sync.OnceFunc(p.missEnded)
}

// missEnded says a take's miss has ended its build or run.
func (p *pool) missEnded() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.misses--
}

// quiet says whether the filler may build at now: no take's miss is
// still building or running, or the latest began missHold ago or more, or
// the pool is closed. During a burst larger than
// the pool every box it built would be taken at once, and a run in a
// pooled box (a session's build with the Go init as its agent, an exec,
// a discard) costs more CPU than the one-shot build a miss makes anyway
// (docs/performance.md, "One-shot runs through the server"): the pool
// refills once the burst has passed.
func (p *pool) quiet(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed || p.misses == 0 || now.Sub(p.lastMiss) >= missHold
}

// waitQuiet waits until quiet, looking every missPoll; it ends when the
// misses end, missHold after the latest, or when the pool closes.
func (p *pool) waitQuiet() {
	for !p.quiet(time.Now()) {
		time.Sleep(missPoll)
	}
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
		for p.waitQuiet(); p.missing(); p.waitQuiet() {
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
