package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/streammux"
)

// A checkpoint of a box over the stream (see streammux's resume.go and
// nsinit's agentresume_linux.go): Quiesce cuts the stream where both
// ends stand still before the box is saved; the session of the restored
// box (Frame.Restored with ResumeNonce) resumes it, learns which
// processes still run (Live) and rebinds each one it wants (Adopt).

// quiesceWait bounds the wait for the agent's answer to Quiesce.
const quiesceWait = sendTimeout

// ErrQuiesced is a request of a session whose stream Quiesce cut for a
// checkpoint: nothing reaches its agent any more.
var ErrQuiesced = errors.New("the session's stream is cut for a checkpoint: take the checkpoint, or end the session")

// ErrCheckpointFailed is a session whose stream Quiesce cut for a
// checkpoint that then failed: nothing can reach its agent again, so
// EndCut ended it.
var ErrCheckpointFailed = errors.New("a checkpoint failed after it cut the session's stream")

// Quiesce cuts a stream session's stream for a checkpoint of its box and
// returns the nonce its restore resumes it with (Frame.ResumeNonce): its
// request is the session's last frame to the agent, and once it returns
// the agent's answer was the agent's last frame, so neither end's frames
// are cut in two by the save. From then on every request fails with
// ErrQuiesced and no event comes: save the box and close the session.
// The caller keeps new processes and file calls out meanwhile (the
// interpreters idle). Output a process writes after it is kept for the
// restored session if the process still runs when that session attaches
// (Live, Adopt); a process that ends before then, or before Adopt takes
// it, ends with its output after the cut lost, since no session holds a
// reader for it. An exec in flight never hears its end here: once the
// checkpoint saved the box (WhilePaused), its Wait fails with the
// session's end, ErrSaved; the restored session drops it (DropLive) or
// adopts it.
func (s *Session) Quiesce(ctx context.Context) ([]byte, error) {
	if !s.f.Stream {
		return nil, errors.New("quiescing: only a session over the stream transport has a stream to cut")
	}
	nonce := make([]byte, streammux.ResumeNonceLen)
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("quiescing: %w", err)
	}
	frame, err := nsinit.EncodeRequest(nsinit.Request{Op: nsinit.OpQuiesce, Nonce: hex.EncodeToString(nonce)})
	if err != nil {
		return nil, fmt.Errorf("quiescing: %w", err)
	}
	if err := s.writeLast(frame); err != nil {
		if !errors.Is(err, ErrQuiesced) {
			s.EndCut(err)
		}
		return nil, err
	}
	wait := time.NewTimer(quiesceWait)
	defer wait.Stop()
	select {
	case <-s.quiesceAck:
		return nonce, nil
	case <-s.done:
		return nil, fmt.Errorf("quiescing: %w", s.Err())
	case <-ctx.Done():
		err := fmt.Errorf("quiescing: %w", ctx.Err())
		s.EndCut(err)
		return nil, err
	case <-wait.C:
		err := fmt.Errorf("%w: it did not answer the quiesce for a checkpoint within %v", nsinit.ErrProtocol, quiesceWait)
		s.breach(err)
		return nil, err
	}
}

// writeLast writes frame as the session's last on the control channel.
func (s *Session) writeLast(frame []byte) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	switch {
	case s.ctlClosed || s.ctlCh == nil:
		return ErrSessionEnded
	case s.quiesced:
		return s.quiescedErrLocked()
	}
	s.quiesced = true
	if err := s.ctlCh.WriteLast(frame, time.Now().Add(sendTimeout)); err != nil {
		return fmt.Errorf("quiescing: %w", err)
	}
	return nil
}

// EndCut ends a session whose stream Quiesce cut, for a checkpoint that
// failed with cause: no request can reach its agent again, so it fails
// closed (its box killed) and every request and Err name the failed
// checkpoint (ErrCheckpointFailed) rather than ErrQuiesced for good. It
// does nothing to a session Quiesce did not cut.
func (s *Session) EndCut(cause error) {
	s.sendMu.Lock()
	if !s.quiesced {
		s.sendMu.Unlock()
		return
	}
	e := &endedError{cause: fmt.Sprintf("%v, after cutting its stream: start a new session", cause), final: true, is: ErrCheckpointFailed}
	if s.cutErr == nil {
		s.cutErr = e
	}
	s.sendMu.Unlock()
	s.endWith(e)
	s.f.Kill()
}

// quiescedErrLocked is a request's error once Quiesce cut the stream:
// ErrQuiesced, or EndCut's end (sendMu held).
func (s *Session) quiescedErrLocked() error {
	if s.cutErr != nil {
		return s.cutErr
	}
	return ErrQuiesced
}

// quiescedNow reports whether Quiesce cut the stream, and the error a
// request then gets.
func (s *Session) quiescedNow() (bool, error) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.quiesced, s.quiescedErrLocked()
}

// quiescedEvent takes the agent's answer to Quiesce; one not asked for
// breaks the protocol.
func (s *Session) quiescedEvent() error {
	s.sendMu.Lock()
	asked := s.quiesced
	s.sendMu.Unlock()
	if !asked {
		return fmt.Errorf("%w: a quiesced event the host did not ask for", nsinit.ErrProtocol)
	}
	select {
	case <-s.quiesceAck:
		return fmt.Errorf("%w: a second quiesced event", nsinit.ErrProtocol)
	default:
		close(s.quiesceAck)
	}
	return nil
}

// resumedLine takes a restored stream agent's first event, which must
// be its resumed event: each process it lists must be one the
// checkpointed session had not heard the end of (Frame.Prior), and its
// fds listed as no more than its spawn was granted (Pending).
func (s *Session) resumedLine(line []byte) error {
	e, err := nsinit.ParseEvent(line, false)
	switch {
	case err != nil:
		return err
	case e.Kind != nsinit.EventResumed:
		return fmt.Errorf("%w: a restored agent's first event is %.40q, not resumed", nsinit.ErrProtocol, e.Kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	live := make(map[uint64][]string, len(e.Live))
	for _, p := range e.Live {
		pend, ok := s.seen[p.ID]
		if !ok || pend.Events&sawExited != 0 {
			return fmt.Errorf("%w: the restored agent lists process %d as running, which the checkpoint does not hold as running", nsinit.ErrProtocol, p.ID)
		}
		if err := pend.checkListed(p.ID, p.Streams); err != nil {
			return err
		}
		live[p.ID] = p.Streams
	}
	s.live = live
	return nil
}

// maxLiveEntry bounds one process's entry in a resumed event as the
// agent writes it: its ID (20 digits), and MaxRequestFDs directions.
const maxLiveEntry = len(`{"id":18446744073709551615,"streams":[]},`) + nsinit.MaxRequestFDs*len(`"null",`)

// resumedLineLimit bounds the resumed event's line: an event's, and an
// entry for each process the checkpoint holds as running, which it may
// list and no more (its list may hold up to nsinit.MaxLive).
func (s *Session) resumedLineLimit() int {
	n := 0
	for _, p := range s.f.Prior {
		if p.Events&sawExited == 0 {
			n++
		}
	}
	return maxEventLine + n*maxLiveEntry
}

// Live is, for a restored stream session, the processes its agent still
// runs that Adopt has not taken, by ID, with the direction of each of
// their fds 0, 1, 2, ... (nsinit.StreamIn, StreamOut, or StreamNull for
// /dev/null or a stream that had ended).
func (s *Session) Live() map[uint64][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	live := make(map[uint64][]string, len(s.live))
	for id, streams := range s.live {
		live[id] = append([]string(nil), streams...)
	}
	return live
}

// Adopt takes over process id, one Live lists, binding its fds to
// files as Spawn binds a new process's: files[i] must go the way Live
// says (a pipe end the process reads for "in", one it writes for "out",
// /dev/null for "null"). It returns the process, running, whose Wait and
// Kill work as a spawned one's. Each process may be adopted once; files
// that do not fit are refused and leave it listed. A listed process no
// caller adopts runs, its output unread, until DropLive or Close.
func (s *Session) Adopt(id uint64, files []*os.File) (interp.Process, error) {
	s.holdMu.RLock()
	defer s.holdMu.RUnlock()
	s.mu.Lock()
	streams, ok := s.live[id]
	err := s.endedLocked()
	s.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, notListed(id)
	}
	// Checked before the listing is taken: wrong files leave the process
	// for a right Adopt.
	if err := checkAdopted(streams, files); err != nil {
		return nil, fmt.Errorf("adopting process %d: %w", id, err)
	}
	p := &Process{s: s, id: id, started: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	if err := s.endedLocked(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if _, ok := s.live[id]; !ok {
		// Another Adopt took it meanwhile.
		s.mu.Unlock()
		return nil, notListed(id)
	}
	delete(s.live, id)
	if pend, ok := s.seen[id]; !ok || pend.Events&sawExited != 0 {
		// Its exited event came first: it ended during the restore.
		s.mu.Unlock()
		return nil, fmt.Errorf("adopting process %d: it ended during the restore", id)
	}
	s.procs[id] = p
	s.mu.Unlock()
	p.markStarted(0, 0)
	req := nsinit.Request{Op: nsinit.OpReattach, ID: id}
	if err := s.sendFailed(s.sendStream(req, files, p.done)); err != nil {
		s.mu.Lock()
		delete(s.procs, id)
		if s.endedLocked() == nil {
			// Listed again, so a later Adopt or DropLive can still
			// reach it: a refused send must not strand the process.
			s.live[id] = streams
		}
		s.mu.Unlock()
		p.settle(nil, nsinit.Event{})
		return nil, fmt.Errorf("adopting process %d: %w", id, err)
	}
	return p, nil
}

// DropLive releases process id, one Live lists, which the caller will
// not adopt (an exec in flight at the checkpoint, whose caller is gone):
// the agent kills it and its process group, and its end cuts the relays
// parked for it, so none of its pipes stays held with output nobody
// reads. Its end comes as an event the session drops (Frame.Prior). A
// listed process neither adopted nor dropped runs until Close.
func (s *Session) DropLive(id uint64) error {
	s.holdMu.RLock()
	defer s.holdMu.RUnlock()
	s.mu.Lock()
	streams, ok := s.live[id]
	err := s.endedLocked()
	if err == nil && ok {
		delete(s.live, id)
	}
	s.mu.Unlock()
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("dropping process %d: the restored sandbox does not list it as running (or it was adopted or dropped already)", id)
	}
	if err := s.send(nsinit.Request{Op: nsinit.OpKill, ID: id, Signal: int(unix.SIGKILL)}, nil, false); err != nil {
		s.mu.Lock()
		if s.endedLocked() == nil {
			// Listed again: the kill did not go out, so a later
			// DropLive must still be able to try.
			s.live[id] = streams
		}
		s.mu.Unlock()
		return fmt.Errorf("dropping process %d: %w", id, err)
	}
	return nil
}

// notListed is Adopt's error for a process Live does not list.
func notListed(id uint64) error {
	return fmt.Errorf("adopting process %d: the restored sandbox does not list it as running (or it was adopted already)", id)
}

// checkAdopted checks files against the directions a restored agent
// listed for a process's fds.
func checkAdopted(streams []string, files []*os.File) error {
	if len(files) != len(streams) {
		return fmt.Errorf("%d files given for a process of %d fds", len(files), len(streams))
	}
	for i, f := range files {
		c, dir, err := streamFD(f)
		if c != nil {
			// only its direction was wanted; nothing read or wrote the copy
			_ = c.Close()
		}
		if err != nil {
			return fmt.Errorf("fd %d: %w", i, err)
		}
		if dir != streams[i] {
			return fmt.Errorf("fd %d is %q in the sandbox, and the file given is %q", i, streams[i], dir)
		}
	}
	return nil
}
