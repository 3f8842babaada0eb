package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/streammux"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// The file API through the agent (nsinit.OpFile): for a box whose
// /workspace is not on this host, the agent runs workspace.Dir on its
// own side, as the sandbox user, and the host never touches the box's
// files. Each operation is a request on the control channel naming a
// channel opened just before it; a write's bytes go out on that
// channel, and the answer (a framed workspace.Reply, then a read's
// bytes) comes back on it. Everything in the answer is hostile: bounded,
// strictly decoded and checked against the request; an answer that is
// not one an agent could give is a breach, which ends the session (the
// box can only hurt itself).

// fileReplyWait bounds the wait for an operation's answer once the
// request (and a write's bytes) went out, and nsinit.FileIdle each wait
// for a read's next bytes: the agent runs on the box's CPU quota, so
// they are generous, but a box that never answers holds no call for
// ever.
const fileReplyWait = time.Minute

// fileMinRate is the slowest an upload's or a read's bytes may cross as
// a whole: with fileReplyWait it sets each transfer's overall deadline
// from its size, so a box that trickles bytes just within nsinit.FileIdle
// cannot hold a call (its channel, its slot, a goroutine here) for
// longer (64 MiB: about 18 min).
const fileMinRate = 64 << 10

// transferBy is the deadline of a transfer of n bytes starting now.
func transferBy(n int64) time.Time {
	return time.Now().Add(fileReplyWait + time.Duration(n/fileMinRate)*time.Second)
}

// RemoteFiles serves the file API through the agent, within lim, for a
// stream session whose box has no files on this host, or whose Frame
// asks for it (FilesByAgent). Any other session refuses with an error
// wrapping errors.ErrUnsupported, and its files are reached through
// Workspace.
func (s *Session) RemoteFiles(lim workspace.Limits) (workspace.Files, error) {
	switch {
	case !s.f.Stream || (s.f.OpenWorkspace != nil && !s.f.FilesByAgent):
		return nil, fmt.Errorf("the sandbox's files are on this host: %w", errors.ErrUnsupported)
	case lim.ReadOnly:
		return nil, errors.New("a read-only workspace is served from the host's copy, not by the agent")
	}
	if lim.MaxFileBytes <= 0 {
		lim.MaxFileBytes = workspace.DefaultMaxFileBytes
	}
	if lim.MaxEntries <= 0 {
		lim.MaxEntries = workspace.DefaultMaxEntries
	}
	return &remoteFiles{s: s, lim: lim, uid: -1, gid: -1}, nil
}

// remoteFiles is workspace.Files through the agent.
type remoteFiles struct {
	s   *Session
	lim workspace.Limits
	// mu guards closed and calls, the calls in progress, whose
	// channels Close cuts rather than waiting on a box that answers
	// slowly (or never).
	mu     sync.Mutex
	closed bool
	calls  map[*fileCall]struct{}
	// idMu guards uid and gid, the ids the agent acts as, known from its
	// first answer (-1 before).
	idMu     sync.Mutex
	uid, gid int
}

// fileCall is one operation in flight: its channel, and the slot it
// holds among the session's channels until done.
type fileCall struct {
	s    *Session
	ch   *streammux.Channel
	once sync.Once
}

// done closes the call's channel and gives its slot back, once.
func (c *fileCall) done() {
	c.once.Do(func() {
		// the box learns of the end by the close; once the stream ended,
		// every close fails alike and the session's end is reported
		if err := c.ch.Close(); err != nil && c.s.mux.Err() == nil {
			c.s.log().Warn("closing a file channel", "err", err)
		}
		c.s.held.files.Add(-1)
	})
}

func (r *remoteFiles) Stat(p string) (workspace.Entry, error) {
	return r.entryCall(nsinit.FileRequest{Op: nsinit.FileStat, Path: p}, p, nil)
}

func (r *remoteFiles) Mkdir(p string) (workspace.Entry, error) {
	return r.entryCall(nsinit.FileRequest{Op: nsinit.FileMkdir, Path: p}, p, nil)
}

func (r *remoteFiles) Rename(src, dst string) (workspace.Entry, error) {
	if _, err := workspace.CleanPath(src); err != nil {
		return workspace.Entry{}, err
	}
	return r.entryCall(nsinit.FileRequest{Op: nsinit.FileRename, Path: src, To: dst}, dst, nil)
}

func (r *remoteFiles) Write(p string, body io.Reader, mode fs.FileMode) (workspace.Entry, error) {
	return r.entryCall(nsinit.FileRequest{Op: nsinit.FileWrite, Path: p, Mode: uint32(mode)}, p, body)
}

func (r *remoteFiles) Remove(p string, recursive bool) error {
	if _, err := workspace.CleanPath(p); err != nil {
		return err
	}
	c, rep, err := r.call(nsinit.FileRequest{Op: nsinit.FileRemove, Path: p, Recursive: recursive}, nil)
	if err != nil {
		return err
	}
	c.done()
	if rep.Entry != nil {
		return r.breach(errors.New("a remove answered with an entry"))
	}
	return r.replyError(rep)
}

func (r *remoteFiles) List(p string) ([]workspace.Entry, error) {
	wp, err := workspace.CleanPath(p)
	if err != nil {
		return nil, err
	}
	c, rep, err := r.call(nsinit.FileRequest{Op: nsinit.FileList, Path: p}, nil)
	if err != nil {
		return nil, err
	}
	c.done()
	if rep.Entry != nil {
		return nil, r.breach(errors.New("a listing answered with one entry"))
	}
	if rep.Error != nil && rep.Entries == nil {
		return nil, r.replyError(rep)
	}
	out := make([]workspace.Entry, 0, len(rep.Entries))
	for _, w := range rep.Entries {
		e, err := workspace.FromWire(wp, w, true)
		if err != nil {
			return nil, r.breach(err)
		}
		out = append(out, e)
	}
	if rep.Error == nil {
		return out, nil
	}
	err = r.replyError(rep)
	if !errors.Is(err, workspace.ErrTruncated) {
		return nil, r.breach(fmt.Errorf("a listing with entries and an error that is not a truncation: %w", err))
	}
	return out, err
}

func (r *remoteFiles) Read(p string) (io.ReadCloser, workspace.Entry, error) {
	wp, err := workspace.CleanPath(p)
	if err != nil {
		return nil, workspace.Entry{}, err
	}
	c, rep, err := r.call(nsinit.FileRequest{Op: nsinit.FileRead, Path: p}, nil)
	if err != nil {
		return nil, workspace.Entry{}, err
	}
	e, err := r.entry(wp, rep)
	switch {
	case err != nil:
		c.done()
		return nil, workspace.Entry{}, err
	case e.Type != workspace.TypeFile:
		c.done()
		return nil, workspace.Entry{}, r.breach(fmt.Errorf("a read of %q answered with a %s", wp, e.Type))
	case e.Size > r.lim.MaxFileBytes:
		c.done()
		return nil, workspace.Entry{}, r.breach(fmt.Errorf("a read of %q answered with %d bytes, over the limit of %d", wp, e.Size, r.lim.MaxFileBytes))
	}
	return &remoteReader{c: c, left: e.Size, size: e.Size, path: wp, by: transferBy(e.Size)}, e, nil
}

// AddWatch is refused: inotify watches the host's own files, and a
// remote box's are not on this host.
func (r *remoteFiles) AddWatch(_ int, p string, _ uint32) (int, error) {
	return -1, fmt.Errorf("watching %q: the sandbox's files are served by its agent, which cannot watch them for this host yet: %w", p, errors.ErrUnsupported)
}

// Owner is the ids the agent acts as, from its answers; the first call
// asks it (a stat of the workspace) when no answer came yet, and -1 for
// both when that fails.
func (r *remoteFiles) Owner() (uid, gid int) {
	r.idMu.Lock()
	known := r.uid >= 0
	r.idMu.Unlock()
	if !known {
		// a failed stat leaves the ids unknown, reported as -1
		_, _ = r.Stat(".")
	}
	r.idMu.Lock()
	defer r.idMu.Unlock()
	return r.uid, r.gid
}

// Close refuses later calls and cuts the channels of those in progress,
// which fail at once: the box sets the pace of a call, and a deleted or
// expired box must not keep its session alive through one. Readers
// returned by Read stay valid until closed, as Dir's do, each within
// its own deadline.
func (r *remoteFiles) Close() error {
	r.mu.Lock()
	r.closed = true
	calls := r.calls
	r.calls = nil
	r.mu.Unlock()
	for c := range calls {
		c.done()
	}
	return nil
}

// track adds c to the calls in progress, false once closed.
func (r *remoteFiles) track(c *fileCall) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	if r.calls == nil {
		r.calls = map[*fileCall]struct{}{}
	}
	r.calls[c] = struct{}{}
	return true
}

// untrack removes c from the calls in progress.
func (r *remoteFiles) untrack(c *fileCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.calls, c)
}

// isClosed says whether Close ran (a failed call was then cut by it).
func (r *remoteFiles) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// errClosed is the error of a call on (or cut by) closed files.
var errClosed = fmt.Errorf("the sandbox's workspace: %w", os.ErrClosed)

// entryCall runs an operation that answers with one entry, that of
// path p.
func (r *remoteFiles) entryCall(req nsinit.FileRequest, p string, body io.Reader) (workspace.Entry, error) {
	wp, err := workspace.CleanPath(p)
	if err != nil {
		return workspace.Entry{}, err
	}
	c, rep, err := r.call(req, body)
	if err != nil {
		return workspace.Entry{}, err
	}
	c.done()
	return r.entry(wp, rep)
}

// entry is the entry of wp an answer carries, or its error.
func (r *remoteFiles) entry(wp string, rep workspace.Reply) (workspace.Entry, error) {
	switch {
	case rep.Error != nil && rep.Entry != nil:
		return workspace.Entry{}, r.breach(errors.New("an answer with both an entry and an error"))
	case rep.Error != nil:
		return workspace.Entry{}, r.replyError(rep)
	case rep.Entry == nil:
		return workspace.Entry{}, r.breach(errors.New("an answer with neither an entry nor an error"))
	}
	e, err := workspace.FromWire(wp, *rep.Entry, false)
	if err != nil {
		return workspace.Entry{}, r.breach(err)
	}
	return e, nil
}

// replyError is the error an answer carries (nil for none), or a breach
// when it is not one the agent could have sent.
func (r *remoteFiles) replyError(rep workspace.Reply) error {
	if rep.Error == nil {
		return nil
	}
	err, bad := workspace.FromWireError(rep.Error)
	if bad != nil {
		return r.breach(bad)
	}
	return err
}

// breach ends the session for an answer no agent of ours gives, and is
// the error the call returns.
func (r *remoteFiles) breach(why error) error {
	err := fmt.Errorf("%w: a file operation's answer: %v", nsinit.ErrProtocol, why) //nolint:errorlint // the cause is ErrProtocol; the answer's fault is text
	r.s.breach(err)
	return err
}

// call sends req (with body's bytes, for a write) and reads its answer;
// the caller ends the call once done with its channel.
func (r *remoteFiles) call(req nsinit.FileRequest, body io.Reader) (*fileCall, workspace.Reply, error) {
	if r.isClosed() {
		return nil, workspace.Reply{}, fmt.Errorf("%s %q: %w", req.Op, req.Path, errClosed)
	}
	req.MaxFileBytes, req.MaxEntries = r.lim.MaxFileBytes, r.lim.MaxEntries
	c, err := r.s.sendFile(req)
	if errors.Is(err, ErrNoChannel) {
		return nil, workspace.Reply{}, fmt.Errorf("%s %q: %w (a file call in progress holds one too)", req.Op, req.Path, err)
	}
	if err != nil {
		return nil, workspace.Reply{}, fmt.Errorf("%s %q: %w", req.Op, req.Path, err)
	}
	if !r.track(c) {
		c.done()
		return nil, workspace.Reply{}, fmt.Errorf("%s %q: %w", req.Op, req.Path, errClosed)
	}
	defer r.untrack(c)
	if body != nil {
		aborted, err := r.upload(c, body)
		if aborted {
			r.awaitAbort(c)
		}
		if err != nil {
			c.done()
			if r.isClosed() {
				err = errClosed
			}
			return nil, workspace.Reply{}, fmt.Errorf("writing %q: %w", req.Path, err)
		}
	}
	c.ch.SetReadDeadline(time.Now().Add(fileReplyWait))
	maxEntries := 0 // ReadReply refuses a listing in any other answer
	if req.Op == nsinit.FileList {
		maxEntries = r.lim.MaxEntries
	}
	rep, err := workspace.ReadReply(c.ch, maxEntries)
	if err != nil {
		c.done()
		if r.isClosed() {
			return nil, workspace.Reply{}, fmt.Errorf("%s %q: %w", req.Op, req.Path, errClosed)
		}
		return nil, workspace.Reply{}, r.replyFailed(req, err)
	}
	r.idMu.Lock()
	r.uid, r.gid = int(rep.UID), int(rep.GID)
	r.idMu.Unlock()
	return c, rep, nil
}

// replyFailed is why an answer could not be read: the session's end, a
// box that kept it past fileReplyWait, or a breach.
func (r *remoteFiles) replyFailed(req nsinit.FileRequest, err error) error {
	switch {
	case r.s.mux.Err() != nil:
		return fmt.Errorf("%s %q: %w", req.Op, req.Path, ErrSessionEnded)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%s %q: the sandbox's agent did not answer within %v", req.Op, req.Path, fileReplyWait)
	}
	return r.breach(err)
}

// upload sends at most the file limit and one byte of body on c's
// channel as an upload's chunks, then the end mark (only when the body
// ended well) and the channel's half-close: the agent refuses a file
// over the limit, which the extra byte shows it. The agent stopping its
// reading early (it refused the write) is no error here; its answer
// says why. A body that failed is aborted: no end mark, so the agent
// keeps the old file, and the body's error.
func (r *remoteFiles) upload(c *fileCall, body io.Reader) (aborted bool, err error) {
	src := &sourceReader{r: io.LimitReader(body, r.lim.MaxFileBytes+1)}
	w := &workspace.UploadWriter{W: idleWriter{ch: c.ch, by: transferBy(r.lim.MaxFileBytes + 1)}}
	_, err = io.Copy(w, src)
	switch {
	case src.err != nil:
		err = nil // no end mark
	case err == nil:
		err = w.End()
	}
	if err != nil && !errors.Is(err, streammux.ErrStopped) {
		return false, r.s.streamFailed("sending to the sandbox", err)
	}
	if err := c.ch.CloseWrite(); err != nil && !errors.Is(err, streammux.ErrStopped) {
		return false, r.s.streamFailed("sending to the sandbox", err)
	}
	return src.err != nil, src.err
}

// awaitAbort waits, within fileReplyWait, for the agent's answer to an
// aborted upload, so the call returns once the agent has removed what
// it wrote; the answer (the abort's error) says nothing new.
func (r *remoteFiles) awaitAbort(c *fileCall) {
	c.ch.SetReadDeadline(time.Now().Add(fileReplyWait))
	if _, err := workspace.ReadReply(c.ch, 0); err != nil && r.s.mux.Err() == nil && !r.isClosed() {
		r.s.log().Warn("reading the answer to an aborted upload", "err", err)
	}
}

// sourceReader remembers its source's error, so that an upload that
// failed on the caller's side is told from one the box stopped.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

// idleWriter writes a channel, each write within nsinit.FileIdle and all of
// them by the transfer's deadline.
type idleWriter struct {
	ch *streammux.Channel
	by time.Time
}

func (w idleWriter) Write(b []byte) (int, error) {
	w.ch.SetWriteDeadline(earliest(time.Now().Add(nsinit.FileIdle), w.by))
	return w.ch.Write(b)
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// remoteReader is a read's content: exactly size bytes from the
// channel, each wait within nsinit.FileIdle and all of them by the
// transfer's deadline; fewer is an error.
type remoteReader struct {
	c          *fileCall
	left, size int64
	path       string
	by         time.Time
}

func (rr *remoteReader) Read(b []byte) (int, error) {
	if rr.left == 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > rr.left {
		b = b[:rr.left]
	}
	rr.c.ch.SetReadDeadline(earliest(time.Now().Add(nsinit.FileIdle), rr.by))
	n, err := rr.c.ch.Read(b)
	rr.left -= int64(n)
	if errors.Is(err, io.EOF) && rr.left > 0 {
		return n, fmt.Errorf("reading %q: the sandbox sent %d of its %d bytes: %w", rr.path, rr.size-rr.left, rr.size, io.ErrUnexpectedEOF)
	}
	if err == nil && rr.left == 0 {
		err = io.EOF
	}
	return n, err
}

// Close ends the read, whatever the box still sends.
func (rr *remoteReader) Close() error {
	rr.c.done()
	return nil
}

// sendFile opens a channel for a file operation and sends req naming
// it, within sendTimeout, as sendStream does a spawn's.
func (s *Session) sendFile(req nsinit.FileRequest) (*fileCall, error) {
	by := time.Now().Add(slotWait)
	for {
		if err := s.waitSlots(1, by); err != nil {
			return nil, err
		}
		if c, sent, err := s.trySendFile(req); sent {
			return c, err
		}
	}
}

// trySendFile is sendFile under sendMu: unless another request took the
// free channel meanwhile (then nothing is done, and sent is false), it
// opens the channel and sends the request naming it.
func (s *Session) trySendFile(req nsinit.FileRequest) (c *fileCall, sent bool, err error) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	switch {
	case s.ctlClosed || s.ctlCh == nil:
		return nil, true, ErrSessionEnded
	case s.quiesced:
		return nil, true, s.quiescedErrLocked()
	}
	if free, _ := s.mux.Slots(); free < 1 {
		return nil, false, nil
	}
	ch, err := s.mux.Open()
	if err != nil {
		return nil, true, s.streamFailed("sending to the sandbox", err)
	}
	s.held.files.Add(1)
	c = &fileCall{s: s, ch: ch}
	req.Ch = ch.ID()
	frame, err := nsinit.EncodeRequest(nsinit.Request{Op: nsinit.OpFile, File: &req})
	if err == nil {
		s.ctlCh.SetWriteDeadline(time.Now().Add(sendTimeout))
		_, err = s.ctlCh.Write(frame)
	}
	if err != nil {
		c.done()
		return nil, true, s.streamFailed("sending to the sandbox", err)
	}
	return c, true, nil
}

// streamFailed is a failure of the stream as a caller may see it: once
// the stream ended, ErrSessionEnded, the transport's own text (which
// can name a Pod's or the host's addresses) only logged; otherwise the
// channel's error (a deadline, a close), with what failed.
func (s *Session) streamFailed(what string, err error) error {
	if s.mux.Err() != nil {
		s.log().Warn(what, "err", err)
		return ErrSessionEnded
	}
	return fmt.Errorf("%s: %w", what, err)
}
