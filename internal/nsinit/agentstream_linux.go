package nsinit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/streammux"
	"github.com/warden-sandbox/warden/internal/streamrelay"
	"github.com/warden-sandbox/warden/internal/strictjson"
)

// The agent's side of the stream transport (Config.Stream). The host
// opens channel 1 for control first, then, just before each spawn
// request, one channel per stream of the process, in order: channels
// arrive in id order, and a spawn claims the ones it names. The host is
// trusted by the agent, so a spawn whose channels do not add up is
// refused, not investigated; every wait is bounded all the same.

// controlChannel is the channel the host opens first, for requests in
// and events out.
const controlChannel = 1

// acceptWait bounds the wait for a channel the host opens: it opens
// each before the request that names it, so it is there already unless
// the host is broken.
const acceptWait = 10 * time.Second

// streamRequests reads requests from the control channel and turns each
// spawn's streams into pipes relayed to their channels.
type streamRequests struct {
	// mux and ctl are the stream and its control channel; a takeover
	// after a restore replaces both on the reader's goroutine, which
	// alone reads mux. mu guards ctl (read by eventWriter) and swapped,
	// which the takeover closes and replaces.
	mu  sync.Mutex
	mux *streammux.Mux
	// egress is the bridge's way out, told of each new mux.
	egress *egressStream
	// conn is the connection mux stands on (the reader's goroutine's).
	conn    streammux.Conn
	ctl     *streammux.Channel
	swapped chan struct{}
	// events is where events go: the control channel of the stream of
	// the moment (eventWriter).
	events io.Writer
	// pending are channels accepted and not yet claimed; last is the
	// highest id accepted so far.
	pending map[uint32]*streammux.Channel
	last    uint32

	// relays are each running process's relays, by spawn id, until its
	// end cuts them; linger is how long its outputs may outlive it.
	relayMu sync.Mutex
	relays  map[uint64][]*streamRelay
	linger  time.Duration
}

// outputLinger bounds how long a process's output relays outlive it:
// the host's drain grace (2 s, internal/agent's drainGrace) and 1 s more,
// what processes that kept the pipe still write. Past it the agent gives
// the channels back itself, so a box process holding another exec's pipe
// open (/proc/<pid>/fd/1) cannot pin the stream's channels.
const outputLinger = 3 * time.Second

// streamRelay is one stream of a process: the agent's end of its pipe
// and its channel. After a restore its channel is gone with the old
// stream, but its pipe end is kept for the channel the new host names
// (detach, reattach).
type streamRelay struct {
	ch *streammux.Channel
	f  *os.File
	in bool
	// done is closed when run returns; finished (run's, read after done)
	// says it ended with its stream, the pipe's end closed, rather than
	// detached from a channel a checkpoint cut. pending (likewise) are
	// bytes read and not yet written when it detached, written first
	// once reattached.
	done     chan struct{}
	finished bool
	pending  []byte
	// detaching is set when the agent takes the stream over: the pipe's
	// side of the relay then fails by deadline and keeps its pipe.
	detaching atomic.Bool
	// parked says detachAll stopped the relay at its old channel and it
	// waits for a reattach (relayMu guards it).
	parked bool
	// chMu guards ch, which a reattach replaces while cut may run.
	chMu sync.Mutex
}

// channel is the relay's channel now.
func (r *streamRelay) channel() *streammux.Channel {
	r.chMu.Lock()
	defer r.chMu.Unlock()
	return r.ch
}

func newStreamRelay(ch *streammux.Channel, f *os.File, in bool) *streamRelay {
	return &streamRelay{ch: ch, f: f, in: in, done: make(chan struct{})}
}

// run copies one way with one buffer until its source ends, then closes
// both ends (the peer and the process see end of file or EPIPE), unless
// the copy stopped because a checkpoint cut its channel (ErrResumed) or
// the agent detached it: then the pipe's end stays open and what was
// read and not written stays in pending.
func (r *streamRelay) run() {
	defer close(r.done)
	ch := r.channel()
	var src io.Reader = r.f
	var dst io.Writer = ch
	if r.in {
		src, dst = ch, r.f
	}
	buf := make([]byte, streamrelay.Buffer)
	pend := append(buf[:0], r.pending...)
	r.pending = nil
	for {
		if len(pend) > 0 {
			n, err := dst.Write(pend)
			pend = pend[n:]
			if err != nil {
				if r.detached(err) {
					r.pending = append([]byte(nil), pend...)
					return
				}
				break
			}
		}
		n, err := src.Read(buf)
		pend = buf[:n]
		if err != nil && n == 0 {
			if r.detached(err) {
				return
			}
			break
		}
	}
	r.finished = true
	// Either end may be closed already (a session that ended, or a
	// process whose relays are cut); there is nothing left to report to.
	_ = r.f.Close()
	_ = ch.Close() // closed already, or its slot is given back now
}

// detached says err stopped the relay for a checkpoint's cut, not for
// the end of its stream.
func (r *streamRelay) detached(err error) bool {
	return r.detaching.Load() || errors.Is(err, streammux.ErrResumed)
}

// cut ends the relay, running or done: closing the pipe's end ends a
// pending read or write of it, and closing the channel gives its slot
// back.
func (r *streamRelay) cut() {
	// either may be closed already, by the relay's own end
	_ = r.f.Close()
	_ = r.channel().Close() // as above: closed already, or its slot given back now
}

// ended cuts the relays of spawn id, whose process has ended (or never
// started): its inputs at once (nobody reads them), its outputs after
// linger.
func (sr *streamRequests) ended(id uint64) {
	sr.relayMu.Lock()
	relays := sr.relays[id]
	delete(sr.relays, id)
	sr.relayMu.Unlock()
	var outs []*streamRelay
	for _, r := range relays {
		if r == nil {
			continue
		}
		if r.in {
			r.cut()
		} else {
			outs = append(outs, r)
		}
	}
	if len(outs) > 0 {
		time.AfterFunc(sr.linger, func() {
			for _, r := range outs {
				r.cut()
			}
		})
	}
}

// serveStream starts the stream on conn, the control connection (a
// socket, or a VM's serial port: anything streammux takes), which it
// owns from then on, and waits for the host's control channel. The
// egress bridge's channels (e) start with it.
func serveStream(conn streammux.Conn, e *egressStream) (*streamRequests, error) {
	mux, err := streammux.New(conn, streammux.DefaultConfig(), false)
	if err != nil {
		// the stream never started; conn is ours to close
		_ = conn.Close()
		return nil, fmt.Errorf("starting the control stream: %w", err)
	}
	sr := &streamRequests{mux: mux, egress: e, conn: conn, swapped: make(chan struct{}), pending: map[uint32]*streammux.Channel{}, relays: map[uint64][]*streamRelay{}, linger: outputLinger}
	sr.events = eventWriter{sr}
	ch, err := sr.channel(controlChannel)
	if err != nil {
		// the stream is gone either way
		_ = mux.Close()
		return nil, fmt.Errorf("starting the control stream: %w", err)
	}
	sr.ctl = ch
	e.serve(mux)
	return sr, nil
}

// refusedSpawn is a spawn whose streams could not be set up: the agent
// reports it as a start failure and reads on.
type refusedSpawn struct{ err error }

func (e *refusedSpawn) Error() string { return e.err.Error() }

// read reads one request; for a spawn it returns the process's fds, the
// pipes its streams are relayed through (a *refusedSpawn when they
// could not be had).
func (sr *streamRequests) read() (Request, []int, error) {
	var req Request
	body, err := readFrame(sr.ctl)
	for err != nil && errors.Is(sr.mux.Err(), streammux.ErrResumed) {
		if err := sr.takeOver(); err != nil {
			return req, nil, err
		}
		body, err = readFrame(sr.ctl)
	}
	if err != nil {
		return req, nil, err
	}
	if err := strictjson.Decode(body, &req); err != nil {
		return req, nil, err
	}
	switch req.Op {
	case OpFile:
		sr.file(req.File)
		return req, nil, nil
	case OpQuiesce:
		sr.quiesce(req.Nonce)
		return req, nil, nil
	case OpReattach:
		sr.reattach(req)
		return req, nil, nil
	}
	if req.Op != OpSpawn {
		return req, nil, nil
	}
	if req.Files != 0 || req.Cgroup != 0 {
		return req, nil, &refusedSpawn{errors.New("malformed spawn request: descriptors named over the stream")}
	}
	fds, relays, err := sr.claim(req.Streams)
	if err != nil {
		sr.acceptNamed(req.Streams)
	}
	sr.dropPending()
	if err != nil {
		return req, nil, &refusedSpawn{err}
	}
	sr.relayMu.Lock()
	sr.relays[req.ID] = relays
	sr.relayMu.Unlock()
	// From here on the request is as if its fds came attached.
	req.Files, req.Streams = len(fds), nil
	return req, fds, nil
}

// claim makes a pipe for each stream and starts its relay, returning the
// process's ends in order and the relays. On a failure the ends made so
// far are closed, which ends their relays: at once for output, at the
// host's close of the channel (on the start failure) for input.
func (sr *streamRequests) claim(streams []Stream) ([]int, []*streamRelay, error) {
	var fds []int
	var relays []*streamRelay
	for i, st := range streams {
		fd, relay, err := sr.stream(st)
		if err != nil {
			closeAll(fds)
			return nil, nil, fmt.Errorf("spawn stream %d: %w", i, err)
		}
		fds = append(fds, fd)
		// one entry per fd, nil for /dev/null: a restored agent lists
		// them in order (EventResumed)
		relays = append(relays, relay)
		if relay != nil {
			go relay.run()
		}
	}
	return fds, relays, nil
}

// stream makes one stream's pipe: the process's end, and the relay that
// serves the other; StreamNull is the box's /dev/null, with no relay.
func (sr *streamRequests) stream(st Stream) (int, *streamRelay, error) {
	var p [2]int
	if !KnownStream(st.Dir) {
		return -1, nil, fmt.Errorf("direction %q is none of %q, %q or %q", st.Dir, StreamIn, StreamOut, StreamNull)
	}
	if st.Dir == StreamNull {
		// The box's own /dev/null, as the fd path passes the host's: read
		// and write, since the host's may be an output.
		fd, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, nil, fmt.Errorf("opening /dev/null: %w", err)
		}
		return fd, nil, nil
	}
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, nil, fmt.Errorf("making its pipe: %w", err)
	}
	ch, err := sr.channel(st.Ch)
	if err != nil {
		closeAll(p[:])
		return -1, nil, err
	}
	child, mine := p[1], p[0]
	if st.Dir == StreamIn {
		child, mine = p[0], p[1]
	}
	if err := unix.SetNonblock(mine, true); err != nil {
		closeAll(p[:])
		// the channel's other end is the host's, which learns of it by the start failure
		_ = ch.Close()
		return -1, nil, fmt.Errorf("making its pipe: %w", err)
	}
	r := newStreamRelay(ch, os.NewFile(uintptr(mine), "stream"), st.Dir == StreamIn)
	r.oneWay()
	return child, r, nil
}

// oneWay closes the direction of r's channel the relay does not use.
func (r *streamRelay) oneWay() {
	ch := r.channel()
	if r.in {
		// nothing goes back on a stream the process reads
		_ = ch.CloseWrite()
	} else {
		ch.CloseRead()
	}
}

// channel claims channel id: accepted already and not claimed, or the
// next ones until it comes. A channel claimed twice, or passed over, is
// an error.
func (sr *streamRequests) channel(id uint32) (*streammux.Channel, error) {
	if ch, ok := sr.pending[id]; ok {
		delete(sr.pending, id)
		return ch, nil
	}
	if id <= sr.last {
		return nil, fmt.Errorf("channel %d is claimed already or was never opened", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), acceptWait)
	defer cancel()
	for sr.last < id {
		ch, err := sr.mux.Accept(ctx)
		if err != nil {
			return nil, fmt.Errorf("waiting for channel %d: %w", id, err)
		}
		sr.last = ch.ID()
		sr.pending[ch.ID()] = ch
	}
	ch, ok := sr.pending[id]
	if !ok {
		return nil, fmt.Errorf("channel %d was never opened (the host opened %d)", id, sr.last)
	}
	delete(sr.pending, id)
	return ch, nil
}

// acceptNamed accepts the channels a refused spawn named and did not
// reach, so that dropPending closes them: the host opened them for it,
// and each holds one of its slots until the agent closes it.
func (sr *streamRequests) acceptNamed(streams []Stream) {
	var highest uint32
	for _, st := range streams {
		if st.Dir == StreamIn || st.Dir == StreamOut {
			highest = max(highest, st.Ch)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), acceptWait)
	defer cancel()
	for sr.last < highest {
		ch, err := sr.mux.Accept(ctx)
		if err != nil {
			return // the host opened fewer; nothing more to free
		}
		sr.last = ch.ID()
		sr.pending[ch.ID()] = ch
	}
}

// dropPending closes the channels accepted but not claimed by the spawn
// that accepted them: the host opens a spawn's channels just before it,
// so no later request will name them.
func (sr *streamRequests) dropPending() {
	for id, ch := range sr.pending {
		// the host opened it and named it nowhere; closing it frees its slot
		_ = ch.Close()
		delete(sr.pending, id)
	}
}

// egressStream is the egress bridge's way to the proxy over the stream
// transport (a boxed init with Config.Stream): a channel the agent opens
// per connection, which the host connects to the box's proxy socket. The
// bridge starts during set-up, before the stream does, so a connection
// that comes first waits for it, within bridgeDialTimeout.
type egressStream struct {
	once  sync.Once
	ready chan struct{}
	// mu guards mux, which a takeover after a restore replaces: the
	// channels of a connection made after it must go on the new stream.
	mu  sync.Mutex
	mux *streammux.Mux
}

func newEgressStream() *egressStream {
	return &egressStream{ready: make(chan struct{})}
}

// streamEgress is the init's egressStream: the bridge, started during
// set-up (startBridge), and the agent, started after it (serveStream),
// share it. The init process runs one of each.
var streamEgress = newEgressStream()

// serve makes mux the bridge's stream from now on: the first one, or
// the one a takeover resumed (a connection open on the old one was cut
// with it).
func (e *egressStream) serve(mux *streammux.Mux) {
	e.mu.Lock()
	e.mux = mux
	e.mu.Unlock()
	e.once.Do(func() { close(e.ready) })
}

// dial opens a channel to the proxy.
func (e *egressStream) dial() (egressConn, error) {
	wait := time.NewTimer(bridgeDialTimeout)
	defer wait.Stop()
	select {
	case <-e.ready:
	case <-wait.C:
		return nil, errors.New("the control stream has not started")
	}
	e.mu.Lock()
	mux := e.mux
	e.mu.Unlock()
	ch, err := mux.Open()
	if err != nil {
		return nil, err
	}
	return ch, nil
}
