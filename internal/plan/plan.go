// Package plan is the one-shot sandbox's set-up written down as data: an
// ordered list of operations, each one system call with its arguments
// fully resolved on the host (paths, flags, mount data, descriptors by
// number), which an executor inside the new namespaces carries out in
// order without deciding anything. Two executors apply the same plan: the
// Go init (nsinit) and warden-exec, a small static C program that starts
// no Go runtime (cmd/warden-exec), so both build the same sandbox.
//
// A plan travels as a compact, versioned binary encoding (Encode, Decode;
// docs/protocol.md) that C can read without a parser library. Each Op
// keeps, on the host side only, the context of its error (Op.Context):
// an executor reports only which op failed and the errno (Status), and
// the host turns that into the same one-line message the Go init gives
// (Plan.Err).
package plan

import (
	"errors"
	"fmt"
	"syscall"
)

// Magic opens every encoded plan; Version is the encoding's, which an
// executor of another version refuses.
const (
	Magic   = "WPLN"
	Version = 3
)

// Bounds an executor enforces on an encoded plan: a plan is host-made, so
// they catch bugs and version skew rather than an attacker, but no reader
// ever reads past them.
const (
	MaxBytes = 1 << 20
	MaxOps   = 4096
	// MaxInts and MaxStrs bound one op's counts; the per-code table
	// (Code.counts) is tighter.
	MaxInts = 4096
	MaxStrs = 1024
)

// Op is one operation: a Code and its arguments. Context says, for the
// error message, what the op was doing ("building the root: binding
// /usr"); it is never encoded.
type Op struct {
	Code    Code
	Ints    []uint64
	Strs    []string
	Context string
}

// Plan is an ordered list of ops.
type Plan struct {
	Ops []Op
}

// Add appends op to the plan.
func (p *Plan) Add(op Op) { p.Ops = append(p.Ops, op) }

// Err is the error an executor's status stands for: nil when the program
// ran (StatusRan) or could not start (StatusExec, which the caller turns
// into exit code 126 or 127), else the failed op's context wrapping its
// errno, as the Go init words it (fmt.Errorf("%s: %w", context, errno)),
// or the failed lockdown step's words (lockdownErr).
func (p *Plan) Err(st Status) error {
	switch st.Kind {
	case StatusRan, StatusExec:
		return nil
	case StatusSetup:
		if st.Op < 0 || int(st.Op) >= len(p.Ops) {
			return fmt.Errorf("the executor reported a failure at op %d of a plan of %d: %w", st.Op, len(p.Ops), syscall.Errno(st.Errno))
		}
		if p.Ops[st.Op].Code == Drain && st.Errno == int32(syscall.EINVAL) {
			return fmt.Errorf("%s: the host's stdout or stderr is not a pipe; give the executor pipes as fds 1 and 2: %w", p.Ops[st.Op].Context, syscall.EINVAL)
		}
		return fmt.Errorf("%s: %w", p.Ops[st.Op].Context, syscall.Errno(st.Errno))
	case StatusLockdown:
		return lockdownErr(st.Op, syscall.Errno(st.Errno))
	case StatusRefused:
		if st.Op >= 0 && int(st.Op) < len(p.Ops) {
			return fmt.Errorf("the executor refused the plan at op %d (%s, code %d): %w", st.Op, p.Ops[st.Op].Context, p.Ops[st.Op].Code, ErrRefused)
		}
		return fmt.Errorf("the executor refused the plan (at byte or op %d); is warden-exec from another build? run make build: %w", st.Op, ErrRefused)
	}
	return fmt.Errorf("the executor reported status kind %d, which this warden does not know: %w", st.Kind, ErrRefused)
}

// ErrRefused is wrapped by the error of a plan an executor would not read.
var ErrRefused = errors.New("plan refused")
