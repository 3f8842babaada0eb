// Package native is the host side of the Linux namespace backend: it starts
// the warden binary again as the sandbox init in new namespaces, places it
// in its cgroups, hands it its configuration, wires standard streams, and
// turns how it ended into a spec.Result. The sandbox side is nsinit.
package native

import (
	"errors"
	"io"
	"strings"
)

// IO connects a run to its caller. A nil Stdin reads as empty; nil Stdout
// or Stderr only captures into the Result.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

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

// Hostname is every sandbox's hostname: it reveals nothing of the host.
const Hostname = "sandbox"

// baseEnv is the whole environment a program starts with before the
// caller's --env; nothing of the host's environment is passed in.
var baseEnv = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=/home/sandbox",
	"USER=sandbox",
	"LOGNAME=sandbox",
	"SHELL=/bin/sh",
	"LANG=C.UTF-8",
	"TMPDIR=/tmp",
	"PWD=/workspace",
	"MPLBACKEND=Agg",
}

// buildEnv merges extra over baseEnv; a later KEY wins.
func buildEnv(extra []string) []string {
	env := append([]string(nil), baseEnv...)
	for _, kv := range extra {
		key, _, _ := strings.Cut(kv, "=")
		env = removeKey(env, key)
		env = append(env, kv)
	}
	return env
}

func removeKey(env []string, key string) []string {
	out := env[:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return out
}

// initTasks is the head-room the pids cgroup gives Warden's own init on
// top of the caller's --pids, which RLIMIT_NPROC enforces exactly for the
// program's tasks. On v2 the whole init is in the cgroup: its main thread
// and the Go runtime's few others (GOMAXPROCS=1 keeps them to about five);
// on v1 only its main thread is. Eight covers both with room to spare.
const initTasks = 8
