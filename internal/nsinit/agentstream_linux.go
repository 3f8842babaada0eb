package nsinit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
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
	mux *streammux.Mux
	// events is the control channel, where events go.
	events io.Writer
	ctl    *streammux.Channel
	// pending are channels accepted and not yet claimed; last is the
	// highest id accepted so far.
	pending map[uint32]*streammux.Channel
	last    uint32
}

// serveStream starts the stream on the control connection, which the
// Config was read from and which it owns from then on, and waits for the
// host's control channel.
func serveStream(ctl *os.File) (*streamRequests, error) {
	fd, err := unix.FcntlInt(ctl.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("starting the control stream: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("starting the control stream: %w", err)
	}
	mux, err := streammux.New(os.NewFile(uintptr(fd), "control stream"), streammux.DefaultConfig(), false)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("starting the control stream: %w", err)
	}
	sr := &streamRequests{mux: mux, pending: map[uint32]*streammux.Channel{}}
	ch, err := sr.channel(controlChannel)
	if err != nil {
		// the stream is gone either way
		_ = mux.Close()
		return nil, fmt.Errorf("starting the control stream: %w", err)
	}
	sr.ctl, sr.events = ch, ch
	streamEgress.serve(mux)
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
	if err != nil {
		return req, nil, err
	}
	if err := strictjson.Decode(body, &req); err != nil {
		return req, nil, err
	}
	if req.Op != OpSpawn {
		return req, nil, nil
	}
	if req.Files != 0 || req.Cgroup != 0 {
		return req, nil, &refusedSpawn{errors.New("malformed spawn request: descriptors named over the stream")}
	}
	fds, err := sr.claim(req.Streams)
	if err != nil {
		sr.acceptNamed(req.Streams)
	}
	sr.dropPending()
	if err != nil {
		return req, nil, &refusedSpawn{err}
	}
	// From here on the request is as if its fds came attached.
	req.Files, req.Streams = len(fds), nil
	return req, fds, nil
}

// claim makes a pipe for each stream and starts its relay, returning the
// process's ends in order. On a failure the ends made so far are closed,
// which ends their relays: at once for output, at the host's close of
// the channel (on the start failure) for input.
func (sr *streamRequests) claim(streams []Stream) ([]int, error) {
	var fds []int
	for i, st := range streams {
		fd, relay, err := sr.stream(st)
		if err != nil {
			closeAll(fds)
			return nil, fmt.Errorf("spawn stream %d: %w", i, err)
		}
		fds = append(fds, fd)
		if relay != nil {
			go relay()
		}
	}
	return fds, nil
}

// stream makes one stream's pipe: the process's end, and the relay that
// serves the other (nil for StreamNull).
func (sr *streamRequests) stream(st Stream) (int, func(), error) {
	var p [2]int
	if st.Dir != StreamIn && st.Dir != StreamOut && st.Dir != StreamNull {
		return -1, nil, fmt.Errorf("direction %q is none of %q, %q or %q", st.Dir, StreamIn, StreamOut, StreamNull)
	}
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, nil, fmt.Errorf("making its pipe: %w", err)
	}
	if st.Dir == StreamNull {
		unix.Close(p[1])
		return p[0], nil, nil
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
	f := os.NewFile(uintptr(mine), "stream")
	if st.Dir == StreamIn {
		// nothing goes back on a stream the process reads
		_ = ch.CloseWrite()
		return child, func() { streamrelay.FromChannel(f, ch) }, nil
	}
	ch.CloseRead()
	return child, func() { streamrelay.ToChannel(ch, f) }, nil
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

// streamEgress is the egress bridge's way to the proxy over the stream
// transport (a boxed init with Config.Stream): a channel the agent opens
// per connection, which the host connects to the box's proxy socket. The
// bridge starts during set-up, before the stream does, so a connection
// that comes first waits for it, within bridgeDialTimeout.
var streamEgress = &egressStream{ready: make(chan struct{})}

type egressStream struct {
	once  sync.Once
	ready chan struct{}
	mux   *streammux.Mux
}

// serve makes the stream the bridge's from now on.
func (e *egressStream) serve(mux *streammux.Mux) {
	e.once.Do(func() {
		e.mux = mux
		close(e.ready)
	})
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
	ch, err := e.mux.Open()
	if err != nil {
		return nil, err
	}
	return ch, nil
}
