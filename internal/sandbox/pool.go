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

// retryFirst and retryMax bound the pause after a failed build: it starts
// at retryFirst and doubles with each failure in a row up to retryMax, so
// a build that always fails (a warm-up command missing from the root)
// does not boot a microVM every second for ever. retryFirst is a
// variable for tests.
var retryFirst = time.Second

const retryMax = time.Minute

// refillDelay is how long the pool waits after a box is taken before it
// builds the next.
const refillDelay = 20 * time.Millisecond

// refillWait bounds how long a warmed pool (see Warmer) holds back the
// refill for a taken box whose first exec has not ended: a session that
// never execs, or whose first exec runs long, must not leave the pool
// short for good. Pooled microVMs' first execs took 0.25-1.34 s on a
// loaded 2-core host (docs/performance.md). A variable for tests.
var refillWait = 3 * time.Second

// warmTimeout bounds a pooled box's warm-up exec (Warmer).
const warmTimeout = 30 * time.Second

// pool keeps sandboxes built ahead from one spec, so a Create that asks
// for exactly that spec skips the build. A background filler replaces
// each one taken; a failing build is retried after a pause. A pool with
// warm (a Warmer backend's) runs it in every box it builds before the box
// is handed out, and refills for a taken box only once its first exec
// has ended (take's refill), or refillWait has passed.
type pool struct {
	start   startFunc
	discard func(Box, string)
	warm    func(context.Context, Box) error
	spec    spec.Spec
	size    int
	// onError is told why a build failed, rate-limited by lastError.
	onError   func(error)
	lastError time.Time

	mu     sync.Mutex
	boxes  []pooled
	closed bool
	want   chan struct{}
	// pending are the timers of refillLater's refills not yet woken;
	// close stops them.
	pending map[*time.Timer]struct{}
	// stop is closed by close: it ends the filler's pause after a failure.
	stop chan struct{}
	wg   sync.WaitGroup
}

// startFunc builds a box and names its persistent workspace, if any.
type startFunc func(context.Context, spec.Spec) (Box, string, error)

// pooled is a box built ahead and its workspace's name.
type pooled struct {
	box Box
	ws  string
}

// newPool starts filling a pool of size boxes built by start from s;
// warm, if not nil, warms each (see pool).
func newPool(start startFunc, discard func(Box, string), warm func(context.Context, Box) error, s spec.Spec, size int, onError func(error)) *pool {
	p := &pool{start: start, discard: discard, warm: warm, spec: s, size: size, onError: onError, want: make(chan struct{}, 1), stop: make(chan struct{}), pending: map[*time.Timer]struct{}{}}
	if size > 0 {
		p.wg.Add(1)
		go p.fill()
		p.wake()
	}
	return p
}

// take returns a ready box built from s and its workspace's name, or a
// nil box when the pool has none. A box from a warmed pool comes with
// refill, which the caller calls once the box's first exec has ended
// (calling it again does nothing); the pool refills refillWait after
// the take if it was not called by then. Otherwise refill is a no-op:
// the refill has begun.
func (p *pool) take(s spec.Spec) (box Box, ws string, refill func()) {
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
		if p.warm != nil {
			return b.box, b.ws, p.refillLater()
		}
		p.wake()
		return b.box, b.ws, func() {}
	}
	p.wake()
	return nil, "", func() {}
}

// refillLater wakes the filler when the returned func is called, or
// refillWait from now, whichever is first: a taken box's first exec
// does not compete with the refill's build for the host's CPU (a
// microVM booting beside it doubled it, docs/performance.md). The
// caller holds p.mu (so the timer's wake, which takes it, sees t set).
func (p *pool) refillLater() func() {
	var t *time.Timer
	wake := sync.OnceFunc(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.pending, t)
		if !p.closed { // close closes want once closed is set
			p.wake()
		}
	})
	t = time.AfterFunc(refillWait, wake)
	p.pending[t] = struct{}{}
	return func() {
		t.Stop()
		wake()
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
	failures := 0
	for range p.want {
		// Building a sandbox forks this process, which stalls its other
		// threads while the page tables are copied: let the request that
		// took a box finish first.
		time.Sleep(refillDelay)
		for p.missing() {
			ctx, cancel := context.WithTimeout(context.Background(), poolStartTimeout)
			b, ws, err := p.build(ctx)
			cancel()
			if err != nil {
				failures++
				p.failed(err)
				p.pause(retryAfter(failures))
				continue
			}
			failures = 0
			if !p.add(pooled{b, ws}) {
				p.discard(b, ws)
				return
			}
		}
	}
}

// build starts a box for the pool and warms it, if the pool warms;
// a box whose warm-up failed is discarded.
func (p *pool) build(ctx context.Context) (Box, string, error) {
	b, ws, err := p.start(ctx, p.spec)
	if err != nil || p.warm == nil {
		return b, ws, err
	}
	if err := p.warm(ctx, b); err != nil {
		p.discard(b, ws)
		return nil, "", err
	}
	return b, ws, nil
}

// retryAfter is the pause after the n-th failed build in a row (n >= 1):
// retryFirst doubled n-1 times, at most retryMax.
func retryAfter(n int) time.Duration {
	d := retryFirst
	for i := 1; i < n && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}

// pause waits d, or until close.
func (p *pool) pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.stop:
	}
}

// failed reports a failed build, unless one was reported within
// poolErrorEvery: a pool that cannot build keeps retrying, and the
// operator needs the reason once, not a flood.
func (p *pool) failed(err error) {
	if now := time.Now(); p.lastError.IsZero() || now.Sub(p.lastError) >= poolErrorEvery {
		p.lastError = now
		p.onError(fmt.Errorf("building a pooled sandbox (retried after %v at most): %w", retryMax, err))
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

// close stops the filler and the pending refills' timers, and closes
// every pooled box.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	for t := range p.pending {
		t.Stop()
	}
	p.pending = nil
	boxes := p.boxes
	p.boxes = nil
	p.mu.Unlock()
	if p.size > 0 {
		close(p.stop)
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
