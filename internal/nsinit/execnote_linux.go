package nsinit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
)

// The ELF note in which warden-exec carries the plan version it reads
// (cmd/warden-exec/note.c): owner "Warden", type 1, a u32 description.
// The host reads it from the file it already opened to check trust, a
// few hundred bytes, where asking the executable would cost an exec on
// every one-shot run.
const (
	noteOwner   = "Warden\x00"
	noteVersion = 1
)

// Bounds of the ELF headers execVersion reads: far above what any
// warden-exec has (a static binary has under 16 program headers and
// notes under 1 KiB), low enough that no file makes it read much.
const (
	maxPhdrs    = 64
	maxNoteSize = 4096
	elfHdrSize  = 64
	phdrSize    = 56
	ptNote      = 4
)

// errNoNote is execVersion's answer for a file without the note: a
// warden-exec from before the note, or no warden-exec at all.
var errNoNote = errors.New("no plan version note (a warden-exec from an older build, or not one)")

// execVersion reads the plan version from the note of the 64-bit
// little-endian ELF file r, which must be an executable this machine can
// run (runnableHere): a note-bearing file of another architecture would
// otherwise be taken, and every run would fail at the exec. Everything
// read is bounded: r is trusted (OpenTrusted) but may be any file.
func execVersion(r io.ReaderAt) (uint32, error) {
	hdr := make([]byte, elfHdrSize)
	if _, err := r.ReadAt(hdr, 0); err != nil {
		return 0, fmt.Errorf("reading the ELF header: %w", err)
	}
	if !bytes.HasPrefix(hdr, []byte("\x7fELF\x02\x01\x01")) {
		return 0, errors.New("not a 64-bit little-endian ELF file of version 1")
	}
	le := binary.LittleEndian
	if err := runnableHere(le.Uint16(hdr[16:]), le.Uint16(hdr[18:])); err != nil {
		return 0, err
	}
	phoff, phentsize, phnum := le.Uint64(hdr[32:]), le.Uint16(hdr[54:]), le.Uint16(hdr[56:])
	if phentsize != phdrSize || phnum > maxPhdrs {
		return 0, fmt.Errorf("ELF program headers of %d bytes times %d, want %d bytes times at most %d", phentsize, phnum, phdrSize, maxPhdrs)
	}
	phdrs := make([]byte, int(phnum)*phdrSize)
	if _, err := r.ReadAt(phdrs, int64(phoff)); err != nil {
		return 0, fmt.Errorf("reading the ELF program headers: %w", err)
	}
	for i := 0; i < len(phdrs); i += phdrSize {
		ph := phdrs[i : i+phdrSize]
		if le.Uint32(ph) != ptNote {
			continue
		}
		off, size, align := le.Uint64(ph[8:]), le.Uint64(ph[32:]), le.Uint64(ph[48:])
		if size > maxNoteSize || off > 1<<40 {
			continue
		}
		notes := make([]byte, size)
		if _, err := r.ReadAt(notes, int64(off)); err != nil {
			return 0, fmt.Errorf("reading an ELF note segment: %w", err)
		}
		if align != 8 {
			align = 4
		}
		if v, ok := findNote(notes, align); ok {
			return v, nil
		}
	}
	return 0, errNoNote
}

// findNote looks through one note segment, whose entries are padded to
// align (4, or 8 in a segment aligned so), for warden-exec's version note.
func findNote(b []byte, align uint64) (uint32, bool) {
	le := binary.LittleEndian
	pad := func(n uint64) uint64 { return (n + align - 1) &^ (align - 1) }
	for uint64(len(b)) >= 12 {
		namesz, descsz, typ := uint64(le.Uint32(b)), uint64(le.Uint32(b[4:])), le.Uint32(b[8:])
		nameEnd := 12 + pad(namesz)
		end := nameEnd + pad(descsz)
		if namesz > maxNoteSize || descsz > maxNoteSize || end > uint64(len(b)) {
			return 0, false
		}
		if typ == noteVersion && string(b[12:12+namesz]) == noteOwner && descsz == 4 {
			return le.Uint32(b[nameEnd:]), true
		}
		b = b[end:]
	}
	return 0, false
}

// ELF file types and machines execVersion accepts.
const (
	etExec    = 2
	etDyn     = 3
	emX86_64  = 62
	emAArch64 = 183
	emRISCV   = 243
	emLoong   = 258
)

// errNotRunnable is execVersion's answer for an ELF file this machine
// would refuse to execute (ENOEXEC): no other check of it can help.
var errNotRunnable = errors.New("not an executable for this machine")

// runnableHere refuses an ELF file of type typ and machine mach that the
// kernel would not execute here: not an executable (ET_EXEC, or ET_DYN
// for a static-pie), or built for another architecture than this
// warden's.
func runnableHere(typ, mach uint16) error {
	if typ != etExec && typ != etDyn {
		return fmt.Errorf("%w: ELF type %d, want an executable (%d or %d)", errNotRunnable, typ, etExec, etDyn)
	}
	if want := machine(); mach != want {
		return fmt.Errorf("%w: ELF machine %d, want %d (%s)", errNotRunnable, mach, want, runtime.GOARCH)
	}
	return nil
}

// machine is the ELF e_machine of this build's architecture (the
// little-endian 64-bit ones Linux runs Warden on), or 0, which no file
// matches, for any other.
func machine() uint16 {
	switch runtime.GOARCH {
	case "amd64":
		return emX86_64
	case "arm64":
		return emAArch64
	case "riscv64":
		return emRISCV
	case "loong64":
		return emLoong
	}
	return 0
}
