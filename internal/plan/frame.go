package plan

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Send writes the encoded plan b to an executor's control socket as it
// reads it: a u32 little-endian length, then b.
func Send(w io.Writer, b []byte) error {
	if len(b) > MaxBytes {
		return fmt.Errorf("a plan of %d bytes, over the executor's %d", len(b), MaxBytes)
	}
	frame := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	_, err := w.Write(append(frame, b...))
	return err
}

// ReadStatus reads an executor's one status; io.EOF means it ended
// without one.
func ReadStatus(r io.Reader) (Status, error) {
	var b [StatusSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return Status{}, fmt.Errorf("the executor's status ends early: %w", err)
		}
		return Status{}, err
	}
	return DecodeStatus(b[:])
}
