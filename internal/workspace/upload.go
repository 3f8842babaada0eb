package workspace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// An upload's bytes on the wire when a box's agent serves its files
// (docs/protocol.md, "Files over the stream"): chunks, each a 4-byte
// big-endian length and that many bytes, ended by an empty chunk. A
// channel's end alone says nothing (a host whose caller went away closes
// it as a finished upload does), so only the empty chunk commits the
// file; a stream that ends without it is io.ErrUnexpectedEOF, and the
// write leaves the old file as it would on the host's own path.

// UploadWriter frames the bytes written to it as an upload's chunks on
// W; End commits them.
type UploadWriter struct {
	W   io.Writer
	buf []byte
}

// Write sends b as one chunk (none for an empty b, which would end the
// upload).
func (u *UploadWriter) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	u.buf = append(binary.BigEndian.AppendUint32(u.buf[:0], uint32(len(b))), b...)
	n, err := u.W.Write(u.buf)
	return max(n-4, 0), err
}

// End sends the empty chunk that says the upload is whole.
func (u *UploadWriter) End() error {
	_, err := u.W.Write(make([]byte, 4))
	return err
}

// UploadReader reads an upload's chunks from R: io.EOF after the empty
// chunk, io.ErrUnexpectedEOF when R ends before it.
type UploadReader struct {
	R    io.Reader
	left uint32
	done bool
}

func (u *UploadReader) Read(b []byte) (int, error) {
	if u.done {
		return 0, io.EOF
	}
	if u.left == 0 {
		var head [4]byte
		if _, err := io.ReadFull(u.R, head[:]); err != nil {
			return 0, uploadCut(err)
		}
		if u.left = binary.BigEndian.Uint32(head[:]); u.left == 0 {
			u.done = true
			return 0, io.EOF
		}
	}
	if uint32(len(b)) > u.left {
		b = b[:u.left]
	}
	n, err := u.R.Read(b)
	u.left -= uint32(n)
	if err != nil {
		return n, uploadCut(err)
	}
	return n, nil
}

// uploadCut is err with a bare end of the stream (before the empty
// chunk) turned into io.ErrUnexpectedEOF: the upload was not finished.
func uploadCut(err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("the upload ended before its end mark (aborted): %w", io.ErrUnexpectedEOF)
	}
	return err
}
