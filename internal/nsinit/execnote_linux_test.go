package nsinit

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/plan"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// note is one ELF note's bytes, padded to align.
func note(owner string, typ uint32, desc []byte, align int) []byte {
	var b bytes.Buffer
	le := binary.LittleEndian
	pad := func() {
		for b.Len()%align != 0 {
			b.WriteByte(0)
		}
	}
	_ = binary.Write(&b, le, []uint32{uint32(len(owner)), uint32(len(desc)), typ})
	b.WriteString(owner)
	pad()
	b.Write(desc)
	pad()
	return b.Bytes()
}

// versionNote is warden-exec's note for plan version v.
func versionNote(v uint32) []byte {
	return note(noteOwner, noteVersion, binary.LittleEndian.AppendUint32(nil, v), 4)
}

// elfWith is a 64-bit little-endian ELF file with one PT_NOTE segment
// per entry of segs (its bytes and alignment), as a linker lays them out.
func elfWith(segs ...[]byte) []byte {
	le := binary.LittleEndian
	hdr := make([]byte, elfHdrSize)
	copy(hdr, "\x7fELF\x02\x01\x01")
	le.PutUint16(hdr[16:], etDyn)
	le.PutUint16(hdr[18:], machine())
	le.PutUint64(hdr[32:], elfHdrSize)
	le.PutUint16(hdr[54:], phdrSize)
	le.PutUint16(hdr[56:], uint16(len(segs)))
	off := uint64(elfHdrSize + phdrSize*len(segs))
	var phdrs, body []byte
	for _, seg := range segs {
		ph := make([]byte, phdrSize)
		le.PutUint32(ph, ptNote)
		le.PutUint64(ph[8:], off)
		le.PutUint64(ph[32:], uint64(len(seg)))
		le.PutUint64(ph[48:], 4)
		phdrs, body = append(phdrs, ph...), append(body, seg...)
		off += uint64(len(seg))
	}
	return append(append(hdr, phdrs...), body...)
}

// TestExecVersion: warden-exec's plan version is read from its ELF note,
// past other notes; a file without it, or not an ELF file, or not an
// executable this machine runs (type, machine, ELF version), or one whose
// headers lie, is an error and never a version, and no read goes past
// the file.
func TestExecVersion(t *testing.T) {
	gnu := note("GNU\x00", 3, make([]byte, 20), 4)
	huge := elfWith(versionNote(plan.Version))
	binary.LittleEndian.PutUint16(huge[56:], maxPhdrs+1)
	patched := func(off int, v uint16) []byte {
		f := elfWith(versionNote(plan.Version))
		binary.LittleEndian.PutUint16(f[off:], v)
		return f
	}
	other := uint16(emAArch64)
	if machine() == emAArch64 {
		other = emX86_64
	}
	version0 := elfWith(versionNote(plan.Version))
	version0[6] = 0
	past := elfWith(versionNote(plan.Version))
	binary.LittleEndian.PutUint64(past[elfHdrSize+32:], 1<<20)
	tests := []struct {
		name string
		file []byte
		want uint32
		err  string
	}{
		{"this build", elfWith(versionNote(plan.Version)), plan.Version, ""},
		{"after other notes", elfWith(gnu, append(append([]byte{}, gnu...), versionNote(7)...)), 7, ""},
		{"an older warden-exec (no note)", elfWith(gnu), 0, "no plan version note"},
		{"another owner", elfWith(note("Wardex\x00", noteVersion, []byte{2, 0, 0, 0}, 4)), 0, "no plan version note"},
		{"a description not of 4 bytes", elfWith(note(noteOwner, noteVersion, []byte{2, 0}, 4)), 0, "no plan version note"},
		{"another architecture", patched(18, other), 0, "not an executable for this machine: ELF machine"},
		{"a relocatable object", patched(16, 1), 0, "not an executable for this machine: ELF type 1"},
		{"a core file", patched(16, 4), 0, "ELF type 4"},
		{"an executable (ET_EXEC)", patched(16, etExec), plan.Version, ""},
		{"ELF version 0", version0, 0, "not a 64-bit little-endian ELF file of version 1"},
		{"a script", []byte("#!/bin/sh\necho 2\n" + strings.Repeat("#", 64)), 0, "not a 64-bit little-endian ELF file"},
		{"short", []byte("\x7fELF"), 0, "reading the ELF header"},
		{"too many program headers", huge, 0, "at most 64"},
		{"a note past its segment", elfWith(versionNote(plan.Version)[:20]), 0, "no plan version note"},
		{"a segment over the bound", past, 0, "no plan version note"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := execVersion(bytes.NewReader(tt.file))
			switch {
			case tt.err == "" && (err != nil || got != tt.want):
				t.Errorf("execVersion = %d, %v; want %d", got, err, tt.want)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("execVersion = %d, %v; want an error containing %q", got, err, tt.err)
			}
		})
	}
}

// TestExecVersionOfBuild: warden-exec built from this tree carries the
// plan version this warden writes, so C's PLAN_VERSION and plan.Version
// are one, read as findExecutor reads it.
func TestExecVersionOfBuild(t *testing.T) {
	bin := testhost.Executor(t)
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if v, err := execVersion(f); err != nil || v != plan.Version {
		t.Errorf("execVersion of the built warden-exec = %d, %v; want %d", v, err, plan.Version)
	}
	e, err := elf.NewFile(f)
	if err != nil {
		t.Fatalf("reading the built warden-exec as ELF: %v", err)
	}
	for _, p := range e.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the built warden-exec has a program interpreter; want it static, as make build builds it")
		}
	}
}

// TestCheckExecVersion: findExecutor's check takes a warden-exec of this
// build without running it, refuses one of another build in one line that
// says to reinstall it, and asks one without the note (from before it)
// by running it, as every one was asked before.
func TestCheckExecVersion(t *testing.T) {
	script := func(ran string, v uint32) []byte {
		return []byte(fmt.Sprintf("#!/bin/sh\ntouch %s\necho %d\n", ran, v))
	}
	tests := []struct {
		name string
		file func(ran string) []byte
		want string
		ran  bool
	}{
		{"this build", func(string) []byte { return elfWith(versionNote(plan.Version)) }, "", false},
		{"another build", func(string) []byte { return elfWith(versionNote(plan.Version + 1)) },
			fmt.Sprintf("reads plan version %d but this warden writes version %d; reinstall warden-exec", plan.Version+1, plan.Version), false},
		{"before the note, this version", func(ran string) []byte { return script(ran, plan.Version) }, "", true},
		{"before the note, another version", func(ran string) []byte { return script(ran, plan.Version-1) },
			fmt.Sprintf("reads plan version \"%d\\n\" but this warden writes version %d; reinstall warden-exec", plan.Version-1, plan.Version), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ran, p := filepath.Join(dir, "ran"), filepath.Join(dir, ExecName)
			if err := os.WriteFile(p, tt.file(ran), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := OpenTrusted(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			err = checkExecVersion(f, p)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("checkExecVersion: %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n")):
				t.Errorf("checkExecVersion: %v, want one line containing %q", err, tt.want)
			}
			if _, err := os.Stat(ran); (err == nil) != tt.ran {
				t.Errorf("checkExecVersion ran the file: %v, want %v", err == nil, tt.ran)
			}
		})
	}
}
