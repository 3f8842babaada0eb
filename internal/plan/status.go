package plan

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"github.com/warden-sandbox/warden/internal/seccomp"
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
	// StatusLockdown: locking down before the program failed at step Op
	// (LockBounding and the others below) with Errno.
	StatusLockdown
)

// A StatusLockdown status's Op is the lockdown step that failed, in the
// order warden-exec takes them: dropping bounding capability c is
// LockBounding + c (c below 64), then the rest. Each is worded as the Go
// init words the same step (internal/nsinit's lockdown), so the user
// reads the same message from either executor.
const (
	LockBounding   = 0
	LockAmbient    = 64
	LockCapset     = 65
	LockNoNewPrivs = 66
	// LockFilter is installing the seccomp filter; LockListener is
	// installing it with a listener, refused with EINVAL (a kernel
	// without seccomp user notification, as seccomp.InstallNotifying
	// reads that refusal).
	LockFilter   = 67
	LockListener = 68
	// LockNoFilter is a plan with Sysinfo and no Seccomp op: no filter
	// would send the calls to answer.
	LockNoFilter = 69
)

// lockdownErr words a failure of lockdown step step with errno, as the
// Go init does.
func lockdownErr(step int32, errno syscall.Errno) error {
	switch {
	case step >= LockBounding && step < LockAmbient:
		return fmt.Errorf("dropping bounding capability %d: %w", step-LockBounding, errno)
	case step == LockAmbient:
		return fmt.Errorf("clearing ambient capabilities: %w", errno)
	case step == LockCapset:
		return fmt.Errorf("capset: %w", errno)
	case step == LockNoNewPrivs:
		return fmt.Errorf("setting no_new_privs: %w", errno)
	case step == LockFilter && errno == syscall.EACCES:
		return fmt.Errorf("installing seccomp filter (is no_new_privs set?): %w", errno)
	case step == LockFilter:
		return fmt.Errorf("installing seccomp filter: %w", errno)
	case step == LockListener:
		return fmt.Errorf("installing seccomp filter: the kernel lacks seccomp user notification; use Linux %s or newer: %w", seccomp.MinNotifyingKernel, errno)
	case step == LockNoFilter:
		return fmt.Errorf("starting the sysinfo answerer: the plan has no seccomp filter to send it the calls: %w", errno)
	}
	return fmt.Errorf("the executor reported a failure at lockdown step %d: %w", step, errno)
}

// A StatusExec status's Op says which step of starting the program
// failed: ExecLookup, finding the command (Errno ENOENT: not found;
// ENOEXEC: not an executable file; else stat's errno), or the fork/exec
// of the path found in PATH entry Op-ExecExecve (ExecExecve itself for a
// command with a slash): execve, or the pipe and fork before it, which
// the Go init's os/exec reports the same way.
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
	case s.Kind > StatusLockdown:
		return Status{}, fmt.Errorf("an executor status of unknown kind %d", s.Kind)
	case s.Kind == StatusRan && (s.ExitCode < 0 || s.ExitCode > 255 || s.Signal < 0 || s.Signal > 64):
		return Status{}, fmt.Errorf("an executor status with exit code %d and signal %d", s.ExitCode, s.Signal)
	case (s.Kind == StatusSetup || s.Kind == StatusExec || s.Kind == StatusLockdown) && s.Errno <= 0:
		return Status{}, fmt.Errorf("an executor failure with errno %d", s.Errno)
	}
	return s, nil
}
