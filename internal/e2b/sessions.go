package e2b

import (
	"context"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// Sessions is what the E2B front end needs of *sandbox.Manager. As in
// Warden's own API, every method takes the owner (the tenant of the API
// key) and answers sandbox.ErrNotFound for another owner's session exactly
// as for a missing one.
type Sessions interface {
	// Create builds a session for owner: one E2B sandbox.
	Create(ctx context.Context, owner string, o sandbox.SessionOptions) (sandbox.Info, error)
	// Get describes one of owner's sessions.
	Get(owner, id string) (sandbox.Info, error)
	// List describes owner's live sessions, oldest first.
	List(owner string) []sandbox.Info
	// Delete ends one of owner's sessions (E2B's kill).
	Delete(ctx context.Context, owner, id string) error
	// Exec runs one step in a session: the code interpreter's way in.
	Exec(ctx context.Context, owner, id string, req sandbox.ExecRequest, live sandbox.Stream) (spec.Result, error)
	// Files gives link-safe access to a session's /workspace.
	Files(owner, id string) (*workspace.Dir, error)
	// Spawn starts a process in a session's box beside its execs: E2B's
	// commands, which may outlive the request that started them.
	Spawn(ctx context.Context, owner, id string, c interp.Command) (interp.Process, error)
}
