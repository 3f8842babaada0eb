package agent

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/streammux"
	"github.com/warden-sandbox/warden/internal/streamrelay"
)

// A process's fds over the stream: a channel per fd, opened just before
// the spawn that names them, relayed to the fd the host would have
// passed, and cut once the process ends.

// relay is one fd of a process, carried by a channel.
type relay struct {
	ch *streammux.Channel
	f  *os.File
	// in: the process reads it (the host writes the channel).
	in bool
	// done is closed when the process ends: the relay then no longer
	// holds its channel for good (heldChannels).
	done <-chan struct{}
	// held counts the relay until it has ended.
	held *heldChannels
	once sync.Once
}

// ended takes the relay out of held, once.
func (r *relay) ended() {
	r.once.Do(func() { r.held.remove(r) })
}

// streamFile is one fd of a process before its channel: its direction
// and, unless it is /dev/null, a non-blocking copy of it (the caller
// closes its own once the spawn returns).
type streamFile struct {
	f   *os.File
	dir string
}

// streamFiles sizes up files, the fds a process gets, and counts the
// channels they need; on an error the copies made are closed.
func streamFiles(files []*os.File) ([]streamFile, int, error) {
	sfs := make([]streamFile, 0, len(files))
	need := 0
	for i, f := range files {
		c, dir, err := streamFD(f)
		if err != nil {
			closeStreamFiles(sfs)
			return nil, 0, fmt.Errorf("the process's fd %d: %w", i, err)
		}
		sf := streamFile{f: c, dir: dir}
		if c != nil {
			need++
		}
		sfs = append(sfs, sf)
	}
	return sfs, need, nil
}

func closeStreamFiles(sfs []streamFile) {
	for _, sf := range sfs {
		if sf.f != nil {
			// a copy no relay took: nothing read or wrote it
			_ = sf.f.Close()
		}
	}
}

// openStreams opens a channel for each of sfs that needs one and names
// them in req; sendMu is held and the stream has room for them all
// (checked under sendMu, the only place channels are opened), so the
// channels are opened just before the request that claims them and
// never half of them.
func (s *Session) openStreams(req *nsinit.Request, sfs []streamFile, done <-chan struct{}) ([]*relay, error) {
	var relays []*relay
	for i, sf := range sfs {
		if sf.f == nil {
			req.Streams = append(req.Streams, nsinit.Stream{Dir: sf.dir})
			continue
		}
		r, err := s.openStream(sf, done)
		if err != nil {
			closeRelays(relays)
			closeStreamFiles(sfs[i+1:])
			return nil, fmt.Errorf("the process's fd %d: %w", i, err)
		}
		req.Streams = append(req.Streams, nsinit.Stream{Ch: r.ch.ID(), Dir: sf.dir})
		relays = append(relays, r)
	}
	return relays, nil
}

// openStream opens sf's channel for a process that ends when done is
// closed; sf.f is the relay's (closed on an error).
func (s *Session) openStream(sf streamFile, done <-chan struct{}) (*relay, error) {
	ch, err := s.mux.Open()
	if err != nil {
		// the stream has ended: the slots were checked under sendMu
		_ = sf.f.Close()
		return nil, fmt.Errorf("sending to the sandbox: %w", err)
	}
	r := &relay{ch: ch, f: sf.f, in: sf.dir == nsinit.StreamIn, done: done, held: &s.held}
	s.held.add(r)
	if r.in {
		ch.CloseRead() // nothing comes back on a stream the process reads
	} else if err := ch.CloseWrite(); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// slotWait bounds the wait for the box to free channels the host has
// finished with: their close or stop is on its way, unless the box keeps
// them back. The box's agent runs on the box's CPU quota, so it may be
// slow; the wait holds no lock a kill, a pause or another request waits
// for (a request holds holdMu only shared), so they go on. It is longer
// than outputLinger, so the outputs of a process that ended as the wait
// began are closed here, and owed by the box for owedGrace, before it
// ends.
const slotWait = sendTimeout

// owedGrace is how long the box may owe the close or stop of a channel
// the host has finished with before keeping it counts as a breach: time
// for an honest agent on a small CPU quota, and short enough that
// outputs cut during a wait (within outputLinger of its start) are owed
// that long before it ends, with room for late timers on a loaded host
// (TestStreamOwedGraceFitsTheWait).
const owedGrace = 5 * time.Second

// waitSlots waits until the stream has room for need more channels.
// If the channels the host holds (its running processes' and file
// calls') leave no room, that is ErrNoChannel at once: only a kill frees
// them. Otherwise the slots missing free themselves (outputs of ended
// processes, cut within outputLinger) or are the box's to free: they
// get slotWait (until by). Then, if the box has owed the close or stop
// of channels for owedGrace or more (an honest close in flight is not
// one of them) and those are what the request lacks, that is a breach;
// else ErrNoChannel.
func (s *Session) waitSlots(need int, by time.Time) error {
	s.sendMu.Lock()
	mux := s.mux
	s.sendMu.Unlock()
	if need == 0 || mux == nil {
		return nil // nothing to wait for, or no stream (trySendStream says so)
	}
	limit := mux.MaxChannels()
	if live := s.held.count() + 1; live+need > limit {
		return fmt.Errorf("%w (%d of %d channels in use, %d more wanted)", ErrNoChannel, live, limit, need)
	}
	err := mux.WaitSlots(need, by)
	switch {
	case err == nil:
		return nil
	case mux.Err() != nil:
		return fmt.Errorf("sending to the sandbox: %w", err)
	}
	free, _ := mux.Slots()
	if kept := mux.OwedFor(owedGrace); kept > 0 && free+kept >= need {
		err = fmt.Errorf("%w: it holds %d stream channels the host has finished with, for %v: %v", nsinit.ErrProtocol, kept, slotWait, err) //nolint:errorlint // the cause is ErrProtocol; the stream's figures are text
		s.breach(err)
		return err
	}
	return fmt.Errorf("%w: those of ended ones were not freed within %v: %v", ErrNoChannel, slotWait, err) //nolint:errorlint // ErrNoChannel is what callers match
}

// streamFD says how f is relayed: "null" for /dev/null, else "in" or
// "out" by its access mode, with a non-blocking copy of it (so that
// closing the copy ends a pending read).
func streamFD(f *os.File) (*os.File, string, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, "", err
	}
	var c *os.File
	dir := ""
	var ferr error
	cerr := rc.Control(func(fd uintptr) { c, dir, ferr = copyStream(fd) })
	if cerr != nil {
		return nil, "", cerr
	}
	return c, dir, ferr
}

func copyStream(fd uintptr) (*os.File, string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(fd), &st); err != nil {
		return nil, "", err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == unix.Mkdev(1, 3) {
		return nil, nsinit.StreamNull, nil
	}
	flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err != nil {
		return nil, "", err
	}
	dir := nsinit.StreamIn
	switch flags & unix.O_ACCMODE {
	case unix.O_WRONLY:
		dir = nsinit.StreamOut
	case unix.O_RDWR:
		return nil, "", errors.New("it is open for reading and writing; the stream carries one way only (give a pipe end)")
	}
	c, err := streamrelay.NonblockingCopy(fd, "stream")
	return c, dir, err
}

// run relays until either end is done.
func (r *relay) run() {
	defer r.ended()
	if r.in {
		streamrelay.ToChannel(r.ch, r.f)
	} else {
		streamrelay.FromChannel(r.f, r.ch)
	}
}

// close ends a relay, running or not.
func (r *relay) close() {
	defer r.ended()
	// the box learns of the channel's end by its close
	_ = r.ch.Close()
	_ = r.f.Close() // the host's copy of a pipe end: nothing is left to flush
}

func closeRelays(relays []*relay) {
	for _, r := range relays {
		r.close()
	}
}

// outputLinger bounds how long an output stream may stay open after its
// process ended: what processes that held the pipe still write (Exec
// stops reading after drainGrace anyway). A box that never closes the
// channel then loses it, rather than keep its slot on the stream.
const outputLinger = drainGrace + time.Second

// cutRelays ends a process's relays once it has ended: its stdin and
// other inputs at once (nobody reads them), its outputs after
// outputLinger whatever they still carry (a box that writes on after its
// process's end, or a reader that stopped, must not keep the slot: once
// closed here, the box owes its close and the breach rule applies).
func cutRelays(done <-chan struct{}, relays []*relay) {
	<-done
	for _, r := range relays {
		if r.in {
			r.close()
		} else {
			time.AfterFunc(outputLinger, r.close)
		}
	}
}

// sendStream sends req over the control channel within sendTimeout,
// with a channel for each of files, relayed from then on; cutRelays
// ends the relays once done is closed. The wait for free channels holds
// no lock; the check that they are free and their opens do.
func (s *Session) sendStream(req nsinit.Request, files []*os.File, done <-chan struct{}) error {
	sfs, need, err := streamFiles(files)
	if err != nil {
		return err
	}
	if req.Op == nsinit.OpSpawn {
		s.grant(req.ID, sfs)
	}
	by := time.Now().Add(slotWait)
	for {
		if err := s.waitSlots(need, by); err != nil {
			closeStreamFiles(sfs)
			return err
		}
		if sent, err := s.trySendStream(req, sfs, need, done); sent {
			return err
		}
	}
}

// grant records the directions of spawn id's fds, which a restored
// agent may list of it no more than (Pending). A spawn granted no stream
// (every fd /dev/null) keeps none: a process with none recorded may be
// listed with null fds alone, which is the same bound, and its record
// stays a number (a checkpoint's record is bounded in size).
func (s *Session) grant(id uint64, sfs []streamFile) {
	dirs := make([]string, len(sfs))
	granted := false
	for i, sf := range sfs {
		dirs[i] = sf.dir
		granted = granted || sf.dir != nsinit.StreamNull
	}
	if !granted {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.seen[id]; ok {
		p.Streams = dirs
		s.seen[id] = p
	}
}

// trySendStream is sendStream under sendMu: unless another request took
// the free channels meanwhile (then nothing is done, and sent is false),
// it opens the channels, sends req and starts the relays, and sfs are
// taken, whatever the error.
func (s *Session) trySendStream(req nsinit.Request, sfs []streamFile, need int, done <-chan struct{}) (sent bool, err error) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	switch {
	case s.ctlClosed || s.ctlCh == nil:
		closeStreamFiles(sfs)
		return true, ErrSessionEnded
	case s.quiesced:
		closeStreamFiles(sfs)
		return true, s.quiescedErrLocked()
	}
	if free, _ := s.mux.Slots(); free < need {
		return false, nil
	}
	relays, err := s.openStreams(&req, sfs, done)
	if err != nil {
		return true, err
	}
	frame, err := nsinit.EncodeRequest(req)
	if err == nil {
		s.ctlCh.SetWriteDeadline(time.Now().Add(sendTimeout))
		_, err = s.ctlCh.Write(frame)
	}
	if err != nil {
		closeRelays(relays)
		return true, fmt.Errorf("sending to the sandbox: %w", err)
	}
	for _, r := range relays {
		go r.run()
	}
	if len(relays) > 0 {
		go cutRelays(done, relays)
	}
	return true, nil
}
