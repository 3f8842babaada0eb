package nsinit

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/warden-sandbox/warden/internal/streammux"
	"github.com/warden-sandbox/warden/internal/streamrelay"
)

// The agent's side of a checkpoint over the stream (OpQuiesce,
// EventResumed, OpReattach). The host quiesces the stream before it
// saves the box: its quiesce request is its last frame, the agent's
// answer its own, and the agent's end is armed for a resume with the
// host's nonce. A restored box wakes with its reader between frames of
// the old stream, on a connection from a new host, whose resume frame
// ends the old stream (ErrResumed); the agent then starts a new stream
// on the connection, detaches every relay from its old channel while
// keeping its pipe (and the bytes it held), lists the processes that
// still run with what each of their fds is now, and rebinds each
// process the host names in a reattach request to the channels it
// names. Processes run on throughout: no pipe of theirs is closed by
// the takeover.

// detachWait bounds the wait for one relay to let go of its channel
// once its pipe's deadline has passed: it returns at once unless the
// agent's own goroutines are starved.
const detachWait = acceptWait

// eventWriter writes events on the control channel of the stream of the
// moment: an event written while a checkpoint cut the stream waits for
// the takeover and goes out on the new stream, after its EventResumed.
type eventWriter struct{ sr *streamRequests }

func (w eventWriter) Write(p []byte) (int, error) {
	for {
		w.sr.mu.Lock()
		ctl, swapped := w.sr.ctl, w.sr.swapped
		w.sr.mu.Unlock()
		// A write on a channel of a stream a resume frame ended fails
		// with the stream's cause, ErrResumed.
		n, err := ctl.Write(p)
		if err == nil || n > 0 || !errors.Is(err, streammux.ErrResumed) {
			return n, err
		}
		<-swapped
	}
}

// quiesce arms the stream for a resume with nonce (hex) and answers
// EventQuiesced as the agent's last frame on it. Nothing more goes out
// on this stream: events wait for the takeover (eventWriter).
func (sr *streamRequests) quiesce(nonce string) {
	n, err := hex.DecodeString(nonce)
	if err == nil {
		err = sr.mux.ArmResume(n)
	}
	var line []byte
	if err == nil {
		line, err = json.Marshal(Event{Kind: EventQuiesced})
	}
	if err == nil {
		err = sr.ctl.WriteLast(append(line, '\n'), time.Now().Add(acceptWait))
	}
	if err != nil {
		// The host waits for the answer within its own bound, and the
		// stream may be gone: stderr is all that is left to tell.
		fmt.Fprintf(os.Stderr, "warden-init: quiescing the stream for a checkpoint: %v\n", err)
	}
}

// takeOver starts the new stream after a resume frame ended the old one,
// points the egress bridge at it, takes the new host's control channel,
// detaches the relays and sends EventResumed, then lets waiting events
// go out on the new stream.
func (sr *streamRequests) takeOver() error {
	conn, err := sr.freshConn()
	if err != nil {
		return err
	}
	mux, err := streammux.ResumeOn(sr.mux, conn)
	if err != nil {
		return err
	}
	// The egress bridge opens its channels on the resumed stream from
	// now on, before the host hears of the resume: on the old one every
	// Open fails (ErrResumed), and a connection the box makes once the
	// host holds the resume done must not be reset. The host takes the
	// box's channels from the stream's start (Frame.EgressChannels).
	sr.egress.serve(mux)
	// The reader's goroutine alone reads sr.mux; eventWriter reads only
	// sr.ctl and sr.swapped, under sr.mu, set below.
	sr.mux, sr.pending, sr.last = mux, map[uint32]*streammux.Channel{}, 0
	ctl, err := sr.channel(controlChannel)
	if err != nil {
		// the stream is gone either way
		_ = mux.Close()
		return fmt.Errorf("resuming the control stream: %w", err)
	}
	line, err := json.Marshal(Event{Kind: EventResumed, Live: sr.detachAll()})
	if err == nil {
		_, err = ctl.Write(append(line, '\n'))
	}
	if err != nil {
		_ = mux.Close() // the stream is gone either way
		return fmt.Errorf("resuming the control stream: %w", err)
	}
	sr.mu.Lock()
	sr.ctl = ctl
	close(sr.swapped)
	sr.swapped = make(chan struct{})
	sr.mu.Unlock()
	return nil
}

// freshConn is a new descriptor of the stream's connection for the
// resumed stream (streammux.ResumeOn says why), or nil where the
// connection is no descriptor.
func (sr *streamRequests) freshConn() (streammux.Conn, error) {
	f, ok := sr.conn.(*os.File)
	if !ok {
		return nil, nil
	}
	c, err := streamrelay.FileCopy(f, "control stream")
	if err != nil {
		return nil, fmt.Errorf("resuming the control stream: %w", err)
	}
	sr.conn = c
	return c, nil
}

// detachAll stops every relay of a running process at its old channel,
// keeping its pipe, and lists the processes with each fd's direction:
// StreamNull for /dev/null and for a stream that had ended. The relays
// are taken under relayMu and stopped outside it, all at once and
// within one detachWait, so a stuck relay holds up neither spawns nor
// ended() nor the others; a process that ended meanwhile is not listed.
func (sr *streamRequests) detachAll() []LiveProcess {
	sr.relayMu.Lock()
	procs := make(map[uint64][]*streamRelay, len(sr.relays))
	for id, relays := range sr.relays {
		procs[id] = relays
	}
	sr.relayMu.Unlock()
	for _, relays := range procs {
		for _, r := range relays {
			if r != nil {
				r.stop()
			}
		}
	}
	by := time.Now().Add(detachWait)
	kept := map[*streamRelay]bool{}
	for _, relays := range procs {
		for _, r := range relays {
			if r != nil && r.stopped(by) {
				kept[r] = true
			}
		}
	}
	return sr.park(procs, kept)
}

// park marks the relays kept (detached from a live stream) parked and
// lists procs, less those whose end cut their relays meanwhile.
func (sr *streamRequests) park(procs map[uint64][]*streamRelay, kept map[*streamRelay]bool) []LiveProcess {
	sr.relayMu.Lock()
	defer sr.relayMu.Unlock()
	live := make([]LiveProcess, 0, len(procs))
	for id, relays := range procs {
		if _, ok := sr.relays[id]; !ok {
			continue
		}
		p := LiveProcess{ID: id, Streams: make([]string, len(relays))}
		for i, r := range relays {
			p.Streams[i] = StreamNull
			if kept[r] {
				r.parked = true
				p.Streams[i] = r.dir()
			}
		}
		live = append(live, p)
	}
	return live
}

// stop makes r's copy stop at its pipe, which stays open: a pending read
// or write of it ends by deadline.
func (r *streamRelay) stop() {
	r.detaching.Store(true)
	// An error means the pipe's end is closed already, and the relay
	// with it.
	_ = r.f.SetDeadline(time.Now())
}

// stopped waits until by for r, stopped, to return: true if it waits
// for a new channel, false if its stream had ended (or it could not be
// stopped in time, when it is cut).
func (r *streamRelay) stopped(by time.Time) bool {
	wait := time.NewTimer(time.Until(by))
	defer wait.Stop()
	select {
	case <-r.done:
	case <-wait.C:
		r.cut()
		return false
	}
	return !r.finished
}

// reattach binds the live process req.ID to the channels req.Streams
// names, one per stream listed "in" or "out", restarting its relays
// with what each held. The host is trusted, but a request that does not
// fit is refused (logged) and the channels it named are closed, so none
// keeps a slot.
func (sr *streamRequests) reattach(req Request) {
	err := sr.rebind(req)
	if err != nil {
		sr.acceptNamed(req.Streams)
		fmt.Fprintf(os.Stderr, "warden-init: reattaching process %d: %v\n", req.ID, err)
	}
	sr.dropPending()
}

// rebind is reattach's work: check req against the process's relays,
// claim its channels, and start the relays again.
func (sr *streamRequests) rebind(req Request) error {
	relays, wants, err := sr.parked(req.ID)
	if err != nil {
		return err
	}
	if len(req.Streams) != len(relays) {
		return fmt.Errorf("%d streams named for a process of %d", len(req.Streams), len(relays))
	}
	chans := make([]*streammux.Channel, len(relays))
	for i, want := range wants {
		if req.Streams[i].Dir != want {
			return fmt.Errorf("stream %d named %q, which is %q", i, req.Streams[i].Dir, want)
		}
		if want == StreamNull {
			continue
		}
		ch, err := sr.channel(req.Streams[i].Ch)
		if err != nil {
			closeChannels(chans)
			return fmt.Errorf("stream %d: %w", i, err)
		}
		chans[i] = ch
	}
	if err := sr.unpark(relays, wants); err != nil {
		closeChannels(chans)
		return err
	}
	for i, r := range relays {
		if chans[i] != nil {
			r.resume(chans[i])
		}
	}
	return nil
}

// parked are the relays of live process id and what each waits for: a
// channel "in" or "out" for a relay detachAll parked, else StreamNull.
// They stay parked until unpark, once the request was checked, so a
// refused reattach leaves the process for a right one.
func (sr *streamRequests) parked(id uint64) ([]*streamRelay, []string, error) {
	sr.relayMu.Lock()
	defer sr.relayMu.Unlock()
	relays, ok := sr.relays[id]
	if !ok {
		return nil, nil, errors.New("no such live process (it may have ended)")
	}
	wants := make([]string, len(relays))
	for i, r := range relays {
		wants[i] = StreamNull
		if r != nil && r.parked {
			wants[i] = r.dir()
		}
	}
	return relays, wants, nil
}

// unpark takes the relays parked found waiting (wants), all or none: a
// process is reattached once, and a second reattach that raced the first
// is refused.
func (sr *streamRequests) unpark(relays []*streamRelay, wants []string) error {
	sr.relayMu.Lock()
	defer sr.relayMu.Unlock()
	for i, r := range relays {
		if wants[i] != StreamNull && !r.parked {
			return errors.New("the process was reattached already")
		}
	}
	for i, r := range relays {
		if wants[i] != StreamNull {
			r.parked = false
		}
	}
	return nil
}

// dir is r's direction as a Stream names it.
func (r *streamRelay) dir() string {
	if r.in {
		return StreamIn
	}
	return StreamOut
}

// resume starts r again on ch, pipe deadlines cleared.
func (r *streamRelay) resume(ch *streammux.Channel) {
	r.chMu.Lock()
	r.ch = ch
	r.chMu.Unlock()
	r.oneWay()
	// the pipe's end is open (its relay detached rather than ended)
	_ = r.f.SetDeadline(time.Time{})
	r.detaching.Store(false)
	r.done = make(chan struct{})
	go r.run()
}

func closeChannels(chans []*streammux.Channel) {
	for _, ch := range chans {
		if ch != nil {
			// claimed for a refused reattach: closing frees the host's slot
			_ = ch.Close()
		}
	}
}
