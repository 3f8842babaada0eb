// Package sandbox is the layer between Warden's front ends (CLI, HTTP API,
// MCP) and its backends: the Backend and Box interfaces every isolation
// backend implements (each box adapted from the agent's Session), and the
// Manager that turns boxes into sessions with a lifecycle, an owner, expiry
// and a warm pool.
//
// Cleanup that nobody waits on (a box that would not close, a cgroup,
// mount, container or workspace left behind) is logged at warn level
// through Config.Logger and BackendOptions.Logger, never dropped, with
// the same attribute names everywhere so one query finds a sandbox's
// lines: "session" (the session id), "box" (the backend's own name for
// the sandbox: native's sandbox user, runsc's container id, Docker's
// container name), "backend" (its name, as in flags) and "err". Extra
// context has its own key ("cgroup", "dir", "workspace").
package sandbox

import (
	"errors"
	"io"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/spawn"
	"github.com/warden-sandbox/warden/internal/spec"
)

// State is where a session is in its life. The only moves are
// creating → ready ⇄ busy → stopping → gone, ready ⇄ paused (see
// Manager.Pause; paused → stopping too), and ready or paused →
// snapshotted → ready (see Manager.Snapshot; snapshotted → stopping
// too); creating may also go straight
// to gone when the sandbox cannot be built. A session whose sandbox died
// moves to dead instead, as do the sessions of a crashed server when the
// next one starts: it stays to say why it died until it is deleted or
// expires. Only a session with a persistent workspace (see Store) keeps
// its files readable there; one without goes after a bounded grace.
type State string

const (
	StateCreating State = "creating"
	StateReady    State = "ready"
	StateBusy     State = "busy"
	StatePaused   State = "paused"
	// StateSnapshotted: the session's box is closed and its files are
	// on disk (see Manager.Snapshot); a resume or an exec starts a box.
	StateSnapshotted State = "snapshotted"
	StateStopping    State = "stopping"
	StateGone        State = "gone"
	StateDead        State = "dead"
)

// States lists every State, in the order of a session's life: the one
// list metrics report and the API's SessionState enum must equal.
var States = []State{
	StateCreating, StateReady, StateBusy, StatePaused, StateSnapshotted, StateStopping, StateGone, StateDead,
}

// SessionOptions say how to build a session.
type SessionOptions struct {
	// Limits bound the whole session; Limits.Timeout is the default
	// per-exec timeout.
	Limits spec.Limits
	// Network is the session's network policy.
	Network spec.NetworkPolicy
	// Env is added to every exec's environment (KEY=VALUE).
	Env []string
	// TTL is the session's longest life; zero means the Manager's default.
	TTL time.Duration
	// IdleTimeout ends a session no exec has used for this long; zero
	// means the Manager's default.
	IdleTimeout time.Duration
	// Template names the template (Config.Templates) the session's root
	// is made from; "" or "host" is the host's root.
	Template string
	// AutoPause pauses the session at its idle timeout instead of ending
	// it (see Manager.Pause); its next exec resumes it. Its TTL still
	// ends it.
	AutoPause bool
	// AutoSnapshot snapshots the session at its idle timeout instead
	// (see Manager.Snapshot); it takes precedence over AutoPause.
	AutoSnapshot bool
}

// Info is what a caller may know about a session.
type Info struct {
	ID          string
	State       State
	CreatedAt   time.Time
	LastUsedAt  time.Time
	ExpiresAt   time.Time
	IdleTimeout time.Duration
	Limits      spec.Limits
	Network     spec.NetworkPolicy
	// Execs counts the execs the session has run.
	Execs int64
	// Reason says why a dead session died.
	Reason string
	// Template names the template the session runs on ("" for the
	// host's root).
	Template string
	// AutoPause says the session pauses at its idle timeout instead of
	// ending; PausedAt is when a paused one was paused.
	AutoPause bool
	PausedAt  time.Time
	// CopyPaused says a paused session is paused only for a snapshot's
	// or a fork's copy of its files, not by its user: the copy's end
	// resumes it, and a Pause makes the pause its user's (so E2B, whose
	// pause answers 409 for one paused already, still pauses it).
	CopyPaused bool
	// AutoSnapshot says the session is snapshotted at its idle timeout.
	AutoSnapshot bool
	// Snapshot describes a snapshotted session's snapshot; nil in every
	// other state.
	Snapshot *SnapshotInfo
}

// SnapshotOptions say what a snapshot keeps besides the session's files.
type SnapshotOptions struct {
	// Memory asks for the box's memory and processes too, where the
	// backend can save them (MemoryBackend): everything the session's
	// processes hold in memory (keys, tokens) is then on the state disk
	// until the snapshot is resumed or deleted. False keeps files only,
	// whatever the backend.
	Memory bool
	// memoryOrNothing, with Memory, refuses a snapshot whose save of the
	// box's memory was not made and left the box as it was: a fork of a
	// running session then copies its files instead (copyForFork), its
	// source untouched, rather than leave it snapshotted with its
	// processes gone.
	memoryOrNothing bool
	// keepRun, when not nil, keeps the run slot and the budget's charge
	// of a session snapshotted from running for its caller instead of
	// giving them back (keepRun says so): a fork's source resumes in
	// them once the copies are made (resumeSnapshotIn), so neither the
	// copies nor another key can take them meanwhile.
	keepRun *heldRun
}

// heldRun is a run slot and a charge of the budget (bytes), counted
// against a session's owner, that no session holds: a snapshot kept
// them for its caller (held).
type heldRun struct {
	held  bool
	bytes int64
}

// giveBack gives r's slot and charge back, if it holds them.
func (r *heldRun) giveBack(m *Manager, owner string) {
	if r != nil && r.held {
		r.held = false
		m.release(owner, r.bytes)
	}
}

// ForkOptions are what a Fork may ask besides its count.
type ForkOptions struct {
	// Memory asks for the source's memory in the copies, where it is
	// kept (a snapshot that kept it) or can be saved (a MemoryBackend).
	// False copies its files only, whatever the backend and the source,
	// so nothing its processes hold in memory is shared between the
	// copies or reaches the state disk, and its processes are left
	// running (paused for the copy only).
	Memory bool
}

// SnapshotInfo describes what a snapshot keeps.
type SnapshotInfo struct {
	// At is when the session was snapshotted.
	At time.Time
	// Memory says the snapshot holds the box's memory and processes too
	// (gVisor over the stream transport, see MemoryBackend): a resume
	// goes on where the box stood, its interpreters' variables kept.
	// False for a snapshot of files only, whose resume starts fresh
	// processes and interpreters.
	Memory bool
	// Bytes, Files and Skipped are what snapshot.Stats says of it.
	Bytes   int64
	Files   int
	Skipped int
}

// ExecRequest is one step in a session: a command, or code in a language.
type ExecRequest struct {
	// Command is argv to run; exactly one of Command and Code is set.
	Command []string
	// Language is one of interp.Languages(); with Code.
	Language string
	// Code is run in the session's persistent interpreter for Language.
	Code string
	// Interpreter names one of several persistent interpreters of
	// Language in the session, each with its own state (E2B's code
	// contexts); empty is the session's default one. See
	// validInterpreterName for what a name may hold.
	Interpreter string
	// Stdin is the command's standard input (commands only).
	Stdin []byte
	// Env is added to the session's environment for this exec.
	Env []string
	// Cwd is the working directory inside the sandbox; empty is /workspace.
	Cwd string
	// Timeout bounds this exec; zero means the session's Limits.Timeout.
	// At the timeout only this exec's processes are killed.
	Timeout time.Duration
}

// Errors the Manager returns; front ends map them to answers (404, 429,
// 409, 400) without matching strings.
var (
	// ErrNotFound: no session with that id belongs to the caller.
	ErrNotFound = errors.New("session not found")
	// ErrTooMany: the concurrent-session limit is reached.
	ErrTooMany = errors.New("too many sessions")
	// ErrBusy: the session is running another exec.
	ErrBusy = errors.New("session is busy")
	// ErrClosed: the session is stopping or gone.
	ErrClosed = errors.New("session is closed")
	// ErrDead: the session's sandbox died; nothing runs in it again, and
	// only its files can be read, if it kept them (see DeadError).
	ErrDead = errors.New("session is dead")
	// ErrUnsupported: the language or feature is not available here.
	ErrUnsupported = errors.New("not supported")
	// ErrNoDescriptors: the server is at its RLIMIT_NOFILE (a flood of
	// connections) and could not open what a request needs; nothing was
	// harmed, and the same request can be retried.
	ErrNoDescriptors = spawn.ErrNoDescriptors
	// ErrPaced: the session's execs have used the host CPU allowed for
	// starting them (see Config.ExecPace), and the exec could not wait
	// for its turn; the error says when to retry and how to avoid it.
	ErrPaced = errors.New("exec pacing")
	// ErrNoChannel: a session over the stream transport runs as many
	// processes and interpreters at once as its stream carries; the exec
	// can be retried once one ends or is closed (an interpreter reset).
	ErrNoChannel = agent.ErrNoChannel
)

// OutOfDescriptors says err is a shortage of file descriptors in the
// server (ErrNoDescriptors, EMFILE or ENFILE): nothing was harmed, and the
// request can be retried.
func OutOfDescriptors(err error) bool { return spawn.OutOfDescriptors(err) }

// Stream receives an exec's output as it happens. Either writer may be
// nil; the two may be called from different goroutines at once.
type Stream struct {
	Stdout io.Writer
	Stderr io.Writer
}
