package interp

import (
	"context"
	"os"
)

// Command is a process to start inside a sandbox.
type Command struct {
	// Argv is the program and its arguments; Argv[0] is looked up on the
	// PATH in Env.
	Argv []string
	// Env is the whole environment, KEY=VALUE.
	Env []string
	// Dir is the working directory inside the sandbox; empty means
	// /workspace.
	Dir string
	// Files become the process's descriptors 0, 1, 2, 3, ... in order. The
	// spawner passes duplicates; the caller still owns and closes these.
	Files []*os.File
}

// ExitStatus is how a process ended.
type ExitStatus struct {
	// Code is the exit status, or 128+N when signal N killed it.
	Code int
	// Signal is the number of the signal that killed it, or 0.
	Signal int
}

// Process is a process started inside a sandbox.
type Process interface {
	// Wait blocks until the process has ended and returns how. It may be
	// called any number of times, from any goroutine.
	Wait() (ExitStatus, error)
	// Kill sends SIGKILL to the process and to every process it started;
	// it does not wait.
	Kill() error
}

// Spawner starts processes inside one sandbox, as the sandbox user, under
// the sandbox's seccomp filter and limits. The native backend's session
// implements it; tests use a plain host spawner.
type Spawner interface {
	Spawn(ctx context.Context, c Command) (Process, error)
}

// Adopter takes over a process already running in its sandbox: one a
// checkpointed session started and its restored sandbox still runs
// (agent.Session.Adopt over the stream transport). Files become its
// descriptors 0, 1, 2, ... as Command.Files would, each going the way it
// went at the spawn (/dev/null for one whose stream had ended).
type Adopter interface {
	Adopt(id uint64, files []*os.File) (Process, error)
}
