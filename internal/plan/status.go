package plan

import (
	"encoding/binary"
	"fmt"
)

// StatusKind says how an executor's run ended.
type StatusKind uint32

// The kinds of Status.
const (
	// StatusRan: the program ran and ended (ExitCode, or Signal).
	StatusRan StatusKind = iota
	// StatusSetup: op Op failed with Errno.
	StatusSetup
	// StatusExec: the program could not start; Errno is exec's.
	StatusExec
	// StatusRefused: the executor would not read the plan; Op is the
	// op it stopped at, or -1 before the first.
	StatusRefused
)

// A StatusExec status's Op says which step of starting the program
// failed: ExecLookup, finding the command (Errno ENOENT: not found;
// ENOEXEC: not an executable file; else stat's errno), or execve of the
// path found in PATH entry Op-ExecExecve (ExecExecve itself for a
// command with a slash).
const (
	ExecLookup = 0
	ExecExecve = 1
)

// StatusSize is the encoded Status's size: five 32-bit fields.
const StatusSize = 20

// Status is what an executor sends the host once, over the control
// socket, when the program has ended or the sandbox could not be built.
type Status struct {
	Kind     StatusKind
	Op       int32
	Errno    int32
	ExitCode int32
	Signal   int32
}

// Encode is the status as the executor writes it: u32 kind, i32 op,
// i32 errno, i32 exit code, i32 signal, little-endian.
func (s Status) Encode() [StatusSize]byte {
	var b [StatusSize]byte
	binary.LittleEndian.PutUint32(b[0:], uint32(s.Kind))
	binary.LittleEndian.PutUint32(b[4:], uint32(s.Op))
	binary.LittleEndian.PutUint32(b[8:], uint32(s.Errno))
	binary.LittleEndian.PutUint32(b[12:], uint32(s.ExitCode))
	binary.LittleEndian.PutUint32(b[16:], uint32(s.Signal))
	return b
}

// DecodeStatus reads an encoded Status, refusing a kind it does not know
// or figures no executor sends.
func DecodeStatus(b []byte) (Status, error) {
	if len(b) != StatusSize {
		return Status{}, fmt.Errorf("an executor status of %d bytes, want %d", len(b), StatusSize)
	}
	s := Status{
		Kind:     StatusKind(binary.LittleEndian.Uint32(b[0:])),
		Op:       int32(binary.LittleEndian.Uint32(b[4:])),
		Errno:    int32(binary.LittleEndian.Uint32(b[8:])),
		ExitCode: int32(binary.LittleEndian.Uint32(b[12:])),
		Signal:   int32(binary.LittleEndian.Uint32(b[16:])),
	}
	switch {
	case s.Kind > StatusRefused:
		return Status{}, fmt.Errorf("an executor status of unknown kind %d", s.Kind)
	case s.Kind == StatusRan && (s.ExitCode < 0 || s.ExitCode > 255 || s.Signal < 0 || s.Signal > 64):
		return Status{}, fmt.Errorf("an executor status with exit code %d and signal %d", s.ExitCode, s.Signal)
	case (s.Kind == StatusSetup || s.Kind == StatusExec) && s.Errno <= 0:
		return Status{}, fmt.Errorf("an executor failure with errno %d", s.Errno)
	}
	return s, nil
}
