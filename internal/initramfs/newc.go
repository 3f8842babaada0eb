package initramfs

import (
	"fmt"
	"io"
)

// header holds the newc fields that vary; the rest (uid, gid, mtime,
// device of the archive) are always 0, which makes archives reproducible.
type header struct {
	ino, mode, nlink, size uint32
	rmajor, rminor         uint32
}

// newcMagic opens every newc header (the variant without checksums).
const newcMagic = "070701"

// entry writes one header, name, padding, data and padding.
func (w *Writer) entry(name string, h header, data []byte, src io.Reader) error {
	hdr := fmt.Sprintf("%s%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		newcMagic, h.ino, h.mode, 0, 0, h.nlink, 0, h.size, 0, 0, h.rmajor, h.rminor, len(name)+1, 0)
	if err := w.write([]byte(hdr + name + "\x00")); err != nil {
		return err
	}
	if err := w.pad(); err != nil {
		return err
	}
	switch {
	case src != nil:
		n, err := io.Copy(&offsetWriter{w}, io.LimitReader(src, int64(h.size)+1))
		if err != nil {
			return w.fail(fmt.Errorf("initramfs %q: copying contents: %w", name, err))
		}
		if n != int64(h.size) {
			return w.fail(fmt.Errorf("initramfs %q: source changed size while copied (%d bytes, stat said %d)", name, n, h.size))
		}
	case data != nil:
		if err := w.write(data); err != nil {
			return err
		}
	}
	return w.pad()
}

// pad writes zeros up to the next 4-byte boundary, as newc requires after
// each header+name and after each file's data.
func (w *Writer) pad() error {
	if n := (4 - w.off%4) % 4; n > 0 {
		return w.write(make([]byte, n))
	}
	return nil
}

func (w *Writer) write(b []byte) error {
	if _, err := (&offsetWriter{w}).Write(b); err != nil {
		return w.fail(fmt.Errorf("initramfs: writing the archive: %w", err))
	}
	return nil
}

// offsetWriter counts the bytes written so padding can be computed.
type offsetWriter struct{ w *Writer }

func (o *offsetWriter) Write(b []byte) (int, error) {
	n, err := o.w.w.Write(b)
	o.w.off += int64(n)
	return n, err
}
