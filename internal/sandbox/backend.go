package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// Backend is one way of isolating code: native (Linux namespaces built by
// Warden), gvisor (runsc) or docker (a container through the Engine API).
// The Manager holds sessions in any, so front ends never see which.
type Backend interface {
	// Name is the backend's name in flags and messages ("native").
	Name() string
	// Start builds a long-lived sandbox from s; its Command is ignored.
	// ctx bounds the start only.
	Start(ctx context.Context, s spec.Spec) (Box, error)
	// Run runs s once in a fresh sandbox, as `warden run` does.
	Run(ctx context.Context, s spec.Spec, stdin io.Reader, live Stream) (spec.Result, error)
}

// Command is one command run in a Box.
type Command struct {
	Argv    []string
	Env     []string
	Dir     string
	Stdin   io.Reader
	Timeout time.Duration
}

// Box is a running long-lived sandbox.
type Box interface {
	// Spawner starts the processes of persistent interpreters.
	interp.Spawner
	// Exec runs one command to its end and reports it; whatever it left
	// running is killed. Its timeout kills only it.
	Exec(ctx context.Context, c Command, live Stream) (spec.Result, error)
	// Env is a process's whole environment: the base, the box's, extra.
	Env(extra ...string) []string
	// Workspace is the box's /workspace, held open by the box, and
	// FileOwner the host ids that access there must act as. Workspace is
	// nil for a box whose files are not on this host, whose agent serves
	// them instead (RemoteFiler).
	Workspace() *os.File
	FileOwner() (uid, gid int)
	// Usage is the CPU time the box's processes used and how many the OOM
	// killer ended, so far; an interpreter's run reports the difference.
	Usage() (cpu time.Duration, ooms uint64)
	// SetNetwork replaces the egress rules of a box made with the proxy.
	SetNetwork(allow, deny []string) error
	// NetworkEvents are the egress proxy's decisions for the box so far.
	NetworkEvents() []spec.NetworkEvent
	// Done is closed when the box has ended, by Close or by dying.
	Done() <-chan struct{}
	// Err says why the box ended, once Done is closed (nil before): how
	// its init ended where the backend can tell, so a session that died
	// is reported with its real cause. An error with a Cause() string
	// method gives that cause as one clause for the session's reason.
	Err() error
	// Pause stops every process of the box where it stands, keeping its
	// memory, so it uses no CPU (the cgroup freezer, runsc pause, the
	// Docker Engine's pause); Resume lets them run again. Nothing else
	// may be asked of a paused box but Close, Usage, its Workspace and
	// what the host serves without it (SetNetwork, NetworkEvents).
	// A box that cannot be paused says so with an error wrapping
	// ErrUnsupported; one whose pause or resume failed half way, so that
	// it may be paused or running, with one wrapping ErrPauseUnknown (the
	// session then ends). Both bound their own wait and do not stop half
	// way when ctx is cancelled.
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	// Close kills everything in the box and removes every trace of it,
	// paused or not.
	Close() error
}

// RemoteFiler is a Box whose file API its own agent serves (a box whose
// /workspace is not on this host, such as a Kubernetes Pod's, or
// native's over the stream transport): RemoteFiles returns the files
// within lim, or an error wrapping errors.ErrUnsupported when the host
// reaches them through Workspace instead. Watching its files (AddWatch)
// is refused with errors.ErrUnsupported, and a snapshot, fork or restore,
// which copies through Workspace, refuses a box whose Workspace is nil.
type RemoteFiler interface {
	RemoteFiles(lim workspace.Limits) (workspace.Files, error)
}

// ErrPauseUnknown is wrapped by a Box's Pause or Resume error when the
// box's runtime failed half way and the box may be paused or running.
var ErrPauseUnknown = errors.New("the sandbox may be paused or running")
