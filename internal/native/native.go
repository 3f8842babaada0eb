// Package native is the host side of the Linux namespace backend: it starts
// the sandbox init in new namespaces (the Go init, or for a one-shot run it
// can build, warden-exec with a plan instead of a Config), places it
// in its cgroups, hands it its configuration, wires standard streams, and
// turns how it ended into a spec.Result; a session is its box handed to
// package agent as a Frame. The sandbox side is nsinit.
package native

import (
	"errors"
	"log/slog"
	"os"
	"strings"

	"github.com/warden-sandbox/warden/internal/agent"
)

// Runtime starts native sandboxes; its zero value is ready to use.
type Runtime struct {
	// Logger receives the warnings of cleanups nobody waits on (a cgroup
	// or proxy socket left behind), with the box's name (nil:
	// slog.Default()).
	Logger *slog.Logger
	// Executor chooses what builds a one-shot run's sandbox (zero:
	// ExecutorAuto); sessions ignore it.
	Executor Executor
	// AgentTransport is how StartSession's host side reaches the agent
	// (zero: TransportFD); one-shot runs have no agent and ignore it.
	AgentTransport AgentTransport
	// ListenerStdin, when set, is a one-shot run's standard input itself,
	// handed to the program as its descriptor 0 instead of a pipe fed
	// from IO.Stdin (which it replaces): a listening unix stream socket
	// (checked by unixlisten.Check), for an inetd-style program in a box
	// with --net none whose launcher accepts TCP on a host address and
	// relays each connection into the box over a connection to it (the
	// test bed's kubelet; `warden run --stdin-listener`, hidden). Never
	// an inet socket: one of the host's network namespace would be the
	// box's way out (unixlisten's doc says why). Run refuses it but with
	// --net none and such a socket; StartSession refuses it; the HTTP API
	// never sets it.
	ListenerStdin *os.File
}

// log is the Runtime's logger, for a box named name.
func (r Runtime) log(name string) *slog.Logger {
	l := r.Logger
	if l == nil {
		l = slog.Default()
	}
	return l.With("backend", "native", "box", name)
}

// IO connects a run to its caller, as in a session's exec.
type IO = agent.IO

// ErrHostUnsupported is wrapped by every error caused by a missing host
// feature (user namespaces disabled, no cgroup controller, seccomp off), so
// callers can tell "this host cannot" from "this request is wrong".
var ErrHostUnsupported = errors.New("host lacks a feature the sandbox needs")

// hostError is an error caused by the host; its text is the cause's, which
// already says what is missing, ending with a pointer to `warden doctor`.
type hostError struct{ err error }

func (e hostError) Error() string {
	msg := e.err.Error()
	if !strings.Contains(msg, "warden doctor") {
		msg += " (see warden doctor)"
	}
	return msg
}
func (e hostError) Unwrap() []error { return []error{ErrHostUnsupported, e.err} }

// initTasks is the head-room the pids cgroup gives Warden's own init on
// top of the caller's --pids, which RLIMIT_NPROC enforces exactly for the
// program's tasks. On v2 the whole init is in the cgroup: its main thread,
// the sysinfo answerer's locked thread (and the one the Go runtime may
// start in its place) and the runtime's few others (GOMAXPROCS=1 keeps
// them to about five; a session's init had seven); on v1 only its main
// thread and the answerer are. Ten covers both with room to spare.
const initTasks = 10
