package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/streammux"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// fileLimits are the limits the hostile-answer tests give RemoteFiles.
var fileLimits = workspace.Limits{MaxFileBytes: 100, MaxEntries: 3}

// remoteOver attaches a stream session with no files on this host to a
// fake guest, and returns its RemoteFiles.
func remoteOver(t *testing.T) (*Session, *streamGuest, workspace.Files) {
	t.Helper()
	s, g := attachStreamFrame(t, spec.DefaultLimits, func(f *Frame) { f.OpenWorkspace = nil })
	files, err := s.RemoteFiles(fileLimits)
	if err != nil {
		t.Fatalf("RemoteFiles() = %v", err)
	}
	return s, g, files
}

// fileRequest reads the host's next file request and accepts its
// channel.
func (g *streamGuest) fileRequest() (nsinit.FileRequest, *streammux.Channel) {
	req := g.request()
	if req.Op != nsinit.OpFile || req.File == nil {
		g.t.Fatalf("request %+v, want a file request", req)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	ch, err := g.mux.Accept(ctx)
	if err != nil || ch.ID() != req.File.Ch {
		g.t.Fatalf("accepting the file request's channel %d: %v, %v", req.File.Ch, ch, err)
	}
	return *req.File, ch
}

// rawReply frames body as the agent frames a reply.
func rawReply(body string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

const fileEntry = `{"type":"file","size":%d,"mode":420,"mtime_sec":0,"mtime_nsec":0,"uid":1000,"gid":1000}`

// TestRemoteFilesHostileAnswers: every answer the box sends is checked;
// one no agent of ours gives ends the session as a breach, and an
// honest error comes back as the same sentinel, the session living on.
func TestRemoteFilesHostileAnswers(t *testing.T) {
	entry := func(size string) string { return strings.Replace(fileEntry, "%d", size, 1) }
	tests := []struct {
		name   string
		call   func(workspace.Files) error
		answer func(t *testing.T, req nsinit.FileRequest, ch *streammux.Channel)
		want   string // in the call's error
		breach bool
		is     error
	}{
		{name: "reply over the bound", call: stat, answer: send(binary.BigEndian.AppendUint32(nil, workspace.MaxReplyBytes+1)), want: "over", breach: true},
		{name: "garbage", call: stat, answer: send(rawReply("garbage")), want: "decoding", breach: true},
		{name: "unknown field", call: stat, answer: send(rawReply(`{"uid":1,"gid":1,"root":true}`)), want: "unknown field", breach: true},
		{name: "no answer", call: stat, answer: send(nil), want: "reading a file reply", breach: true},
		{name: "neither entry nor error", call: stat, answer: send(rawReply(`{"uid":1,"gid":1}`)), want: "neither", breach: true},
		{name: "stat answered with a listing", call: stat, answer: send(rawReply(`{"uid":1,"gid":1,"entries":[` + entry("1") + `]}`)), want: "listing", breach: true},
		{name: "unknown error code", call: stat, answer: send(rawReply(`{"uid":1,"gid":1,"error":{"codes":["root"],"msg":"x"}}`)), want: "unknown error code", breach: true},
		{name: "multi-line message", call: stat, answer: send(rawReply(`{"uid":1,"gid":1,"error":{"msg":"a\nb"}}`)), want: "printable", breach: true},
		{name: "setuid mode", call: stat, answer: send(rawReply(`{"uid":1,"gid":1,"entry":{"type":"file","size":1,"mode":2541,"mtime_sec":0,"mtime_nsec":0,"uid":1,"gid":1}}`)), want: "permission bits", breach: true},
		{name: "listing over the entry limit", call: list, answer: send(rawReply(`{"uid":1,"gid":1,"entries":[` + strings.Repeat(strings.Replace(entry("1"), "{", `{"name":"YQ==",`, 1)+",", 3) + strings.Replace(entry("1"), "{", `{"name":"Yg==",`, 1) + `]}`)), want: "over the limit", breach: true},
		{name: "listing of empty entries far over the limit, refused before decoding them", call: list, answer: sendUnread(rawReply(`{"entries":[{}` + strings.Repeat(",{}", 100000) + `]}`)), want: "over the limit of 3 entries", breach: true},
		{name: "listed name leaving the directory", call: list, answer: send(rawReply(`{"uid":1,"gid":1,"entries":[` + strings.Replace(entry("1"), "{", `{"name":"Li4vZXRj"`+",", 1) + `]}`)), want: "no file name", breach: true},
		{name: "listing with another error", call: list, answer: send(rawReply(`{"uid":1,"gid":1,"entries":[],"error":{"codes":["not_found"],"msg":"x"}}`)), want: "not a truncation", breach: true},
		{name: "read over the file limit", call: read, answer: send(rawReply(`{"uid":1,"gid":1,"entry":` + entry("101") + `}`)), want: "over the limit", breach: true},
		{name: "read of a directory", call: read, answer: send(rawReply(`{"uid":1,"gid":1,"entry":{"type":"dir","size":1,"mode":493,"mtime_sec":0,"mtime_nsec":0,"uid":1,"gid":1}}`)), want: "answered with a dir", breach: true},
		{name: "read cut short", call: read, answer: send(append(rawReply(`{"uid":1,"gid":1,"entry":`+entry("10")+`}`), "12345"...)), want: "sent 5 of its 10 bytes"},
		{name: "honest not found", call: stat, answer: send(rawReply(`{"uid":1,"gid":1,"error":{"codes":["not_found"],"msg":"stat \"x\": no such file or directory in /workspace"}}`)), want: "no such file", is: workspace.ErrNotFound},
		{name: "upload over the limit is cut at limit + 1", call: func(f workspace.Files) error {
			_, err := f.Write("big", strings.NewReader(strings.Repeat("x", 1000)), 0)
			return err
		}, answer: func(t *testing.T, req nsinit.FileRequest, ch *streammux.Channel) {
			n, err := io.Copy(io.Discard, &workspace.UploadReader{R: ch})
			if err != nil || n != fileLimits.MaxFileBytes+1 || req.MaxFileBytes != fileLimits.MaxFileBytes {
				t.Errorf("the box got %d bytes (%v) under a limit of %d; want limit + 1", n, err, req.MaxFileBytes)
			}
			send(rawReply(`{"uid":1,"gid":1,"error":{"codes":["too_large"],"msg":"too large"}}`))(t, req, ch)
		}, want: "too large", is: workspace.ErrTooLarge},
		{name: "upload whose body fails is aborted, not committed", call: func(f workspace.Files) error {
			_, err := f.Write("f", io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(errors.New("client went away"))), 0)
			return err
		}, answer: func(t *testing.T, req nsinit.FileRequest, ch *streammux.Channel) {
			got, err := io.ReadAll(&workspace.UploadReader{R: ch})
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("the box read %q, %v; want io.ErrUnexpectedEOF (no end mark)", got, err)
			}
			send(rawReply(`{"uid":1,"gid":1,"error":{"msg":"writing \"f\": aborted"}}`))(t, req, ch)
		}, want: "client went away"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, g, files := remoteOver(t)
			got := make(chan error, 1)
			go func() { got <- tt.call(files) }()
			req, ch := g.fileRequest()
			tt.answer(t, req, ch)
			var err error
			select {
			case err = <-got:
			case <-time.After(testWait):
				t.Fatalf("the call did not return within %v", testWait)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("call = %v, want an error containing %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("call = %v, want it to match %v", err, tt.is)
			}
			if tt.breach != errors.Is(err, nsinit.ErrProtocol) {
				t.Errorf("call = %v; breach %v, want %v", err, errors.Is(err, nsinit.ErrProtocol), tt.breach)
			}
			// A breach ends the session before the call returns.
			select {
			case <-s.Done():
				if !tt.breach {
					t.Errorf("the session ended (%v) on an honest answer", s.Err())
				} else if !errors.Is(s.Err(), nsinit.ErrProtocol) {
					t.Errorf("the session ended with %v, want a breach", s.Err())
				}
			default:
				if tt.breach {
					t.Errorf("the session lives on after a breach")
				}
			}
		})
	}
}

// send answers with b, then ends the channel.
func send(b []byte) func(*testing.T, nsinit.FileRequest, *streammux.Channel) {
	return func(t *testing.T, _ nsinit.FileRequest, ch *streammux.Channel) {
		if _, err := ch.Write(b); err != nil && !errors.Is(err, streammux.ErrStopped) {
			t.Errorf("answering: %v", err)
		}
		// fails when the host took the answer for a breach and killed the box first
		_ = ch.Close()
	}
}

// sendUnread answers with b, which the host may refuse (ending the
// session) before taking it all, then ends the channel.
func sendUnread(b []byte) func(*testing.T, nsinit.FileRequest, *streammux.Channel) {
	return func(_ *testing.T, _ nsinit.FileRequest, ch *streammux.Channel) {
		// fails once the host took the answer for a breach and killed the box
		_, _ = ch.Write(b)
		_ = ch.Close()
	}
}

func stat(f workspace.Files) error {
	_, err := f.Stat("x")
	return err
}

func list(f workspace.Files) error {
	_, err := f.List(".")
	return err
}

// read reads the whole file, as the file API does.
func read(f workspace.Files) error {
	rc, e, err := f.Read("x")
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.CopyN(io.Discard, rc, e.Size)
	return err
}

// TestRemoteFilesRefused: a session whose files are on this host offers
// no remote files, and a remote box's files cannot be watched.
func TestRemoteFilesRefused(t *testing.T) {
	s, _ := attachStream(t, spec.DefaultLimits)
	if _, err := s.RemoteFiles(workspace.Limits{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("RemoteFiles() of a box with host files = %v, want ErrUnsupported", err)
	}
	_, _, files := remoteOver(t)
	if _, err := files.AddWatch(-1, ".", 0); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("AddWatch() = %v, want ErrUnsupported", err)
	}
	if _, err := files.Stat("../x"); !errors.Is(err, workspace.ErrBadPath) {
		t.Errorf("Stat(../x) = %v, want ErrBadPath before anything is sent", err)
	}
}

// TestRemoteFilesCloseCutsCalls: Close does not wait for a call the box
// holds (an answer that never comes, an upload it takes no bytes of):
// the calls fail as closed, later ones are refused, and the session
// lives on.
func TestRemoteFilesCloseCutsCalls(t *testing.T) {
	for _, tt := range []struct {
		name string
		call func(workspace.Files) error
	}{
		{"a stat never answered", stat},
		{"an upload never taken", func(f workspace.Files) error {
			_, err := f.Write("f", strings.NewReader(strings.Repeat("x", int(fileLimits.MaxFileBytes))), 0)
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, g, files := remoteOver(t)
			got := make(chan error, 1)
			go func() { got <- tt.call(files) }()
			g.fileRequest() // and never answer
			if err := files.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}
			select {
			case err := <-got:
				if !errors.Is(err, os.ErrClosed) {
					t.Errorf("the call = %v, want os.ErrClosed", err)
				}
			case <-time.After(testWait):
				t.Fatalf("the call did not end within %v of Close", testWait)
			}
			if err := stat(files); !errors.Is(err, os.ErrClosed) {
				t.Errorf("a call after Close = %v, want os.ErrClosed", err)
			}
			select {
			case <-s.Done():
				t.Errorf("the session ended (%v)", s.Err())
			default:
			}
		})
	}
}

// TestRemoteFilesStreamEnds: an upload whose stream ends midway fails as
// ErrSessionEnded, without the transport's text.
func TestRemoteFilesStreamEnds(t *testing.T) {
	s, g, files := remoteOver(t)
	pr, pw := io.Pipe()
	got := make(chan error, 1)
	go func() {
		_, err := files.Write("f", pr, 0)
		got <- err
	}()
	g.fileRequest()
	if err := g.conn.Close(); err != nil {
		t.Fatalf("closing the guest's end: %v", err)
	}
	select {
	case <-s.Done():
	case <-time.After(testWait):
		t.Fatalf("the session did not end within %v of its stream", testWait)
	}
	// the upload's next bytes meet the ended stream; the pipe's writer
	// fails once the call stopped reading
	go func() { _, _ = pw.Write([]byte(strings.Repeat("x", 50))); _ = pw.Close() }()
	select {
	case err := <-got:
		if !errors.Is(err, ErrSessionEnded) || strings.Contains(err.Error(), "stream") {
			t.Errorf("Write() = %v, want ErrSessionEnded without the transport's text", err)
		}
	case <-time.After(testWait):
		t.Fatalf("the upload did not end within %v", testWait)
	}
}
