package spawn

import (
	"encoding/json"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/strictjson"
)

// send writes v as one datagram on fd with files beside it.
func send(fd int, v any, files ...*os.File) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	return unix.Sendmsg(fd, b, oob, nil, 0)
}

// recv reads one datagram from fd into v and returns the descriptors that
// came with it. The end of the connection is errClosed. A datagram whose
// descriptors were dropped (this process is at its RLIMIT_NOFILE) is
// still decoded into v, and reported as ErrNoDescriptors, so the caller
// can fail that one message and keep the connection.
func recv(fd int, v any) ([]*os.File, error) {
	buf := make([]byte, maxMessage)
	oob := make([]byte, unix.CmsgSpace(maxFDs*4))
	n, oobn, flags, _, err := nsinit.RecvmsgRetry(fd, buf, oob)
	if err != nil {
		return nil, err
	}
	files, err := parseRights(oob[:oobn])
	if err != nil {
		return nil, err
	}
	switch {
	case n == 0 && oobn == 0:
		return nil, errClosed
	case flags&unix.MSG_TRUNC != 0:
		closeAll(files)
		return nil, fmt.Errorf("a message was truncated")
	}
	if err := strictjson.Decode(buf[:n], v); err != nil {
		closeAll(files)
		return nil, &decodeError{raw: append([]byte(nil), buf[:n]...), err: err}
	}
	if flags&unix.MSG_CTRUNC != 0 {
		closeAll(files)
		return nil, ErrNoDescriptors
	}
	return files, nil
}

var errClosed = fmt.Errorf("connection closed")

// decodeError is a message that arrived whole but could not be decoded
// (another build's, or nonsense), with its bytes for a lenient look.
type decodeError struct {
	raw []byte
	err error
}

func (e *decodeError) Error() string { return "decoding a message: " + e.err.Error() }

func (e *decodeError) Unwrap() error { return e.err }

func parseRights(oob []byte) ([]*os.File, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("parsing descriptors: %w", err)
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "received"))
		}
	}
	return files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}
