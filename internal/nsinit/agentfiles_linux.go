package nsinit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/warden-sandbox/warden/internal/streammux"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// The agent's file service over the stream (OpFile): each request names
// a channel the host opened just before it; the operation runs in a
// goroutine of its own on the box's /workspace through workspace.Dir,
// as the sandbox user, so the host never touches a remote box's files.
// The host is trusted by the agent: a request that does not add up is
// answered with an error, and every wait is bounded all the same.

// filesRoot is the workspace the agent serves: the box's /workspace.
var filesRoot = workdir

// FileIdle bounds each wait of a file operation on its channel, on both
// sides (the other side's next bytes, its credit), so a side that stops
// reading or writing cannot hold the other's goroutine forever.
const FileIdle = time.Minute

// file claims req's channel and serves req on it in a goroutine; a
// request without a channel that can be claimed is dropped (the host
// learns of it by the channel's end, or its own wait).
func (sr *streamRequests) file(req *FileRequest) {
	if req == nil || req.Ch == 0 {
		return
	}
	ch, err := sr.channel(req.Ch)
	sr.dropPending()
	if err != nil {
		return
	}
	go serveFile(ch, *req)
}

// serveFile runs one file operation and answers it on ch, which it
// closes.
func serveFile(ch *streammux.Channel, req FileRequest) {
	// the host learns of the end by the close
	defer closeReported("a file channel", ch)
	if req.Op != FileWrite {
		ch.CloseRead() // nothing more comes from the host
	}
	dir, err := workspace.Open(filesRoot, userUID, userGID, workspace.Limits{MaxFileBytes: req.MaxFileBytes, MaxEntries: req.MaxEntries})
	if err != nil {
		ch.CloseRead()
		writeReply(ch, workspace.Reply{Error: workspace.ToWireError(err)})
		return
	}
	defer closeReported("the workspace", dir)
	rep, body := runFile(dir, ch, req)
	if body == nil {
		writeReply(ch, rep)
		return
	}
	defer closeReported("a file read", body)
	if writeReply(ch, rep) {
		// A host that stops taking the bytes fails the copy within
		// FileIdle; it learns of the end by the channel's close.
		_, _ = io.Copy(idleWriter{ch}, body)
	}
}

// closeReported closes c, reporting a failure on the agent's stderr:
// the host has its answer already.
func closeReported(what string, c io.Closer) {
	if err := c.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "warden-init: closing %s: %v\n", what, err)
	}
}

// writeReply sends rep on ch, and says whether it went.
func writeReply(ch *streammux.Channel, rep workspace.Reply) bool {
	rep.UID, rep.GID = uint32(userUID), uint32(userGID)
	frame, err := workspace.EncodeReply(rep)
	if err != nil {
		frame, err = workspace.EncodeReply(workspace.Reply{Error: workspace.ToWireError(err)})
		if err != nil {
			return false
		}
	}
	ch.SetWriteDeadline(time.Now().Add(FileIdle))
	_, err = ch.Write(frame)
	return err == nil
}

// runFile runs req on dir: its reply, and for a read the file's content.
func runFile(dir *workspace.Dir, ch *streammux.Channel, req FileRequest) (workspace.Reply, io.ReadCloser) {
	var e workspace.Entry
	var err error
	switch req.Op {
	case FileStat:
		e, err = dir.Stat(req.Path)
	case FileList:
		return listReply(dir, req.Path), nil
	case FileRead:
		var rc io.ReadCloser
		if rc, e, err = dir.Read(req.Path); err == nil {
			w := workspace.ToWire(e, false)
			return workspace.Reply{Entry: &w}, rc
		}
	case FileWrite:
		// only the end mark commits: a host that aborts leaves the old file
		e, err = dir.Write(req.Path, &workspace.UploadReader{R: idleReader{ch}}, fs.FileMode(req.Mode))
		ch.CloseRead() // the rest, if any, is not read: the host's write stops
	case FileMkdir:
		e, err = dir.Mkdir(req.Path)
	case FileRemove:
		err = dir.Remove(req.Path, req.Recursive)
		return workspace.Reply{Error: workspace.ToWireError(err)}, nil
	case FileRename:
		e, err = dir.Rename(req.Path, req.To)
	default:
		err = fmt.Errorf("unknown file operation %q: want one of %v", req.Op, FileOps)
	}
	if err != nil {
		return workspace.Reply{Error: workspace.ToWireError(err)}, nil
	}
	w := workspace.ToWire(e, false)
	return workspace.Reply{Entry: &w}, nil
}

// listReply lists p, trimmed so that its reply fits in
// workspace.MaxReplyBytes (then truncated, as a listing over the entry
// limit is).
func listReply(dir *workspace.Dir, p string) workspace.Reply {
	entries, err := dir.List(p)
	if err != nil && !errors.Is(err, workspace.ErrTruncated) {
		return workspace.Reply{Error: workspace.ToWireError(err)}
	}
	rep := workspace.Reply{Entries: make([]workspace.WireEntry, 0, len(entries)), Error: workspace.ToWireError(err)}
	size := 0
	for _, e := range entries {
		w := workspace.ToWire(e, true)
		// a generous bound on the entry's JSON: its fixed fields, and
		// its strings escaped at 6 bytes a byte at worst
		size += 256 + 6*(len(w.Name)+len(w.Link))
		if size > workspace.MaxReplyBytes-64<<10 {
			rep.Error = workspace.ToWireError(fmt.Errorf("listing %q: stopped at %d entries, as many as one answer carries; list a subdirectory instead: %w", p, len(rep.Entries), workspace.ErrTruncated))
			break
		}
		rep.Entries = append(rep.Entries, w)
	}
	rep.Entries = slices.Clip(rep.Entries)
	return rep
}

// idleReader reads ch, each read within FileIdle.
type idleReader struct{ ch *streammux.Channel }

func (r idleReader) Read(b []byte) (int, error) {
	r.ch.SetReadDeadline(time.Now().Add(FileIdle))
	return r.ch.Read(b)
}

// idleWriter writes ch, each write within FileIdle.
type idleWriter struct{ ch *streammux.Channel }

func (w idleWriter) Write(b []byte) (int, error) {
	w.ch.SetWriteDeadline(time.Now().Add(FileIdle))
	return w.ch.Write(b)
}
