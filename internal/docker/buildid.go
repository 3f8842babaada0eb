package docker

import (
	"encoding/binary"
	"io"
	"strings"
)

// maxNoteSegment bounds the note segment goBuildID reads: a Go binary's
// holds its build ID and a GNU build id, about 100 bytes.
const maxNoteSegment = 4096

// goBuildID is the build ID in the Go note (owner "Go", type 4) of r, an
// ELF64 file, or "" if r has none. It reads the program headers itself
// rather than link debug/elf, whose dependencies would cost every warden
// process 0.2 ms of package init and its binary 350 KB.
func goBuildID(r io.ReaderAt) string {
	var eh [64]byte
	if _, err := r.ReadAt(eh[:], 0); err != nil || string(eh[:4]) != "\x7fELF" || eh[4] != 2 {
		return ""
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if eh[5] == 2 {
		bo = binary.BigEndian
	}
	phoff, phentsize, phnum := bo.Uint64(eh[32:40]), uint64(bo.Uint16(eh[54:56])), uint64(bo.Uint16(eh[56:58]))
	if phentsize < 56 || phoff > 1<<32 {
		return ""
	}
	for i := range min(phnum, 64) {
		var ph [56]byte
		if _, err := r.ReadAt(ph[:], int64(phoff+i*phentsize)); err != nil {
			return ""
		}
		const ptNote = 4
		off, size := bo.Uint64(ph[8:16]), bo.Uint64(ph[32:40])
		if bo.Uint32(ph[0:4]) != ptNote || size > maxNoteSegment || off > 1<<32 {
			continue
		}
		seg := make([]byte, size)
		if _, err := r.ReadAt(seg, int64(off)); err != nil {
			return ""
		}
		if id := goNote(seg, bo); id != "" {
			return id
		}
	}
	return ""
}

// goNote finds the Go build ID note in seg, a note segment: each note is
// its owner's size, its description's size, its type, then the owner
// and the description, each padded to 4 bytes.
func goNote(seg []byte, bo binary.ByteOrder) string {
	pad := func(n uint64) uint64 { return (n + 3) &^ 3 }
	for len(seg) >= 12 {
		namesz, descsz, typ := uint64(bo.Uint32(seg[0:4])), uint64(bo.Uint32(seg[4:8])), bo.Uint32(seg[8:12])
		rest := seg[12:]
		if pad(namesz)+pad(descsz) > uint64(len(rest)) {
			return ""
		}
		name, desc := rest[:namesz], rest[pad(namesz):pad(namesz)+descsz]
		const goBuildIDNote = 4
		if strings.TrimRight(string(name), "\x00") == "Go" && typ == goBuildIDNote {
			return string(desc)
		}
		seg = rest[pad(namesz)+pad(descsz):]
	}
	return ""
}
