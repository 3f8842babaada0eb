package sandbox

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Native is the Linux namespaces backend.
type Native struct {
	// Logger receives its cleanup warnings (nil: slog.Default()).
	Logger *slog.Logger
	// Executor builds Run's sandboxes (native.Runtime.Executor); Start's
	// sessions keep the Go init, their agent.
	Executor native.Executor
	// AgentTransport is how Start's sessions reach their agent
	// (native.Runtime.AgentTransport).
	AgentTransport native.AgentTransport
}

// Name is DefaultBackend, native's name in the backend table.
func (Native) Name() string { return DefaultBackend }

// Start starts a native session.
func (n Native) Start(ctx context.Context, s spec.Spec) (Box, error) {
	sess, err := native.Runtime{Logger: n.Logger, AgentTransport: n.AgentTransport}.StartSession(ctx, s)
	if err != nil {
		return nil, err
	}
	return agentBox{sess}, nil
}

// Run is native.Runtime.Run with n's executor.
func (n Native) Run(ctx context.Context, s spec.Spec, stdin io.Reader, live Stream) (spec.Result, error) {
	return native.Runtime{Logger: n.Logger, Executor: n.Executor}.Run(ctx, s, native.IO{Stdin: stdin, Stdout: live.Stdout, Stderr: live.Stderr})
}

// HostWorkspaces says whether sessions can have persistent workspaces:
// they are tmpfs mounts idmapped into the sandbox, which takes root and a
// kernel that can idmap tmpfs (6.3 or later).
func (Native) HostWorkspaces() bool {
	return os.Geteuid() == 0 && native.IdmapsTmpfs()
}

func useSpawner() { native.UseSpawner() }

// HardCeilings are the bounds warden's hard rlimits put on every native
// sandbox: its init inherits them and cannot raise them.
func (Native) HardCeilings() []HardCeiling {
	var out []HardCeiling
	for _, h := range native.HardCeilings() {
		out = append(out, HardCeiling{Field: h.Name, Value: h.Value, Least: leastOf[h.Name], Source: "warden's hard " + h.Rlimit, Raise: h.Raise})
	}
	return out
}

// leastOf is the fewest of a hard-bounded limit a sandbox needs to run an
// interpreter at all.
var leastOf = map[string]int64{"open files": 64, "pids": 16}
