package sandbox

import (
	"context"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// Sessions is what the Manager offers to front ends (Warden's HTTP API,
// MCP, E2B's API): one interface, so they cannot drift apart and each can
// be tested against a fake. Every method takes the owner (the tenant of the
// request's API key) where a session is named, and answers ErrNotFound for
// another owner's session exactly as for a missing one, so ids cannot be
// probed across tenants.
type Sessions interface {
	// Create builds a session for owner.
	Create(ctx context.Context, owner string, o SessionOptions) (Info, error)
	// Get describes one of owner's sessions.
	Get(ctx context.Context, owner, id string) (Info, error)
	// List describes owner's live sessions this server holds, oldest
	// first.
	List(owner string) []Info
	// ListEverywhere is List with, on a RemoteBackend, owner's sessions
	// every other server holds, read from the shared store (which may
	// fail): what a client behind several servers lists.
	ListEverywhere(ctx context.Context, owner string) ([]Info, error)
	// Delete ends one of owner's sessions and frees its sandbox.
	Delete(ctx context.Context, owner, id string) error
	// Pause stops every process of one of owner's sessions, keeping its
	// memory, and Resume lets them run again (see Manager.Pause). An
	// Exec or Spawn on a paused session resumes it first.
	Pause(ctx context.Context, owner, id string) (Info, error)
	Resume(ctx context.Context, owner, id string) (Info, error)
	// Snapshot writes a session's files to disk and closes its box;
	// Resume (or an Exec, a Spawn, Files) restores them into a fresh
	// one (see Manager.Snapshot). Fork makes count new sessions from a
	// session's files, and its memory where o asks and it can be kept
	// (see Manager.Fork).
	Snapshot(ctx context.Context, owner, id string, o SnapshotOptions) (Info, error)
	Fork(ctx context.Context, owner, id string, count int, o ForkOptions) ([]Info, error)
	// Exec runs one step in a session; live, when its writers are set,
	// receives the output as it happens. Cancelling ctx kills the exec.
	Exec(ctx context.Context, owner, id string, req ExecRequest, live Stream) (spec.Result, error)
	// Files gives link-safe access to a session's /workspace and marks the
	// session used; its errors are those of Get.
	Files(ctx context.Context, owner, id string) (workspace.Files, error)
	// Spawn starts a process in a session's box beside its execs (E2B's
	// commands), which may outlive the request that started it.
	Spawn(ctx context.Context, owner, id string, c interp.Command) (interp.Process, error)
	// Run is a one-shot run in a fresh sandbox, destroyed after.
	Run(ctx context.Context, owner string, o SessionOptions, req ExecRequest, live Stream) (spec.Result, error)
	// SetNetwork replaces the allow and deny rules of a session made with
	// the egress proxy.
	SetNetwork(ctx context.Context, owner, id string, allow, deny []string) (Info, error)
	// NetworkEvents are the egress proxy's decisions for a session.
	NetworkEvents(ctx context.Context, owner, id string) ([]spec.NetworkEvent, error)
	// Counts is how many sessions are in each state, for metrics.
	Counts() map[State]int
	// CountsOf is how many of owner's sessions are in each state, for
	// that tenant's metrics.
	CountsOf(owner string) map[State]int
	// DefaultLimits are what a request gets for the limits it leaves out:
	// the Manager's one value, within the operator's ceilings. Their
	// Timeout is a call's timeout when it asks for none.
	DefaultLimits() spec.Limits
	// Ceilings bound what a request may ask for.
	Ceilings() spec.Ceilings
	// LifeCaps are the longest ttl and idle timeout a session may ask for.
	LifeCaps() (ttl, idle time.Duration)
}

// The Manager must keep offering every front end what it needs.
var _ Sessions = (*Manager)(nil)
