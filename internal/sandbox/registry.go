package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/gvisor"
	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/spec"
)

// BackendOptions are the settings of the backends that need any.
type BackendOptions struct {
	// Runsc is the gvisor backend's runsc binary ("": gvisor.FindRunsc's
	// default, make runsc's pinned one where installed).
	Runsc string
	// Platform is runsc's platform ("" is runsc's default).
	Platform string
	// Image is the docker backend's image ("" builds Warden's own root).
	Image string
	// Server says the process will hold many sandboxes at once (warden
	// serve, warden mcp): the native backend then starts sessions from a
	// small spawner process instead of forking this large one.
	Server bool
	// Logger receives the backend's cleanup warnings (a box's cgroup, mount
	// or runtime state it could not remove), with the box's id (default:
	// slog.Default(), as for the Manager).
	Logger *slog.Logger
	// Executor chooses what builds the native backend's one-shot
	// sandboxes (Run: `warden run`, and a server's one-shot runs the pool
	// has no box for); sessions and pooled boxes keep the Go init, which
	// stays as their agent. Zero is native.ExecutorAuto.
	Executor native.Executor
	// AgentTransport is how the native and gvisor backends' sessions
	// (and pooled boxes) reach their agent: native.TransportFD or
	// native.TransportStream, the descriptor-free protocol a VM or pod
	// backend needs; "" is the backend's default (DefaultTransport).
	AgentTransport native.AgentTransport
	// SnapshotCompression is how the gvisor backend writes a box's
	// memory for a snapshot (gvisor.Runtime.Compression; "": none, the
	// default, whose restore loads pages in the background). Either kind
	// of image restores whatever it is now: warden serve's
	// --snapshot-compression.
	SnapshotCompression gvisor.Compression
	// Kubernetes makes the kubernetes backend, called name (see
	// internal/kubeback): set by warden serve, which alone links the
	// Kubernetes client, so that warden run and the slim build stay as
	// small and quick to start as they are. Nil refuses the backend.
	Kubernetes func(name string) (Backend, error)
}

// DefaultBackend is the backend used when none is named.
const DefaultBackend = "native"

// KubernetesBackend is the kubernetes backend's name, which serve's
// kube flags and doctor key on too.
const KubernetesBackend = "kubernetes"

// backendEntry is one backend: its name and how to make it. make is given
// the name, so a backend's Name comes from this table too. transport is
// its default agent transport when it takes BackendOptions.AgentTransport
// (either transport), "" when it has no choice. memory says it writes a
// box's memory for a snapshot (MemoryBackend) over the stream transport,
// so it takes BackendOptions.SnapshotCompression.
type backendEntry struct {
	name      string
	make      func(name string, o BackendOptions) (Backend, error)
	transport native.AgentTransport
	memory    bool
}

// backends are every backend, in the order flags, errors and doctor list
// them. It is the one list of backends: a new one is added here (its
// factory in its own _linux.go file, with an _other.go stub), and every
// flag, error and check derives its list from it.
//
// Native defaults to descriptors, the faster; gVisor to the stream, which
// keeps the host's descriptors out of the box and so lets a snapshot or
// fork keep the box's memory (docs/backends.md).
var backends = []backendEntry{
	{DefaultBackend, newNative, native.TransportFD, false},
	{"gvisor", newGVisor, native.TransportStream, true},
	{"docker", newDocker, "", false},
	{"microvm", newMicroVM, "", false},
	{KubernetesBackend, newKubernetes, "", false},
}

// TransportBackends returns the backends that have a choice of agent
// transport, as help and errors list them: "native or gvisor".
func TransportBackends() string {
	var names []string
	for _, b := range backends {
		if b.transport != "" {
			names = append(names, b.name)
		}
	}
	return spec.OrList(names)
}

// MemoryBackends returns the backends that write a box's memory for a
// snapshot, as help and errors list them: "gvisor".
func MemoryBackends() string {
	var names []string
	for _, b := range backends {
		if b.memory {
			names = append(names, b.name)
		}
	}
	return spec.OrList(names)
}

// CompressionUnused says why backend name ("" is DefaultBackend) over
// agent transport t ("" is its default) would write no memory image for
// gvisor.CompressionFast to compress, and what to change, or "" where it
// writes them.
func CompressionUnused(name string, t native.AgentTransport) string {
	if name == "" {
		name = DefaultBackend
	}
	for _, b := range backends {
		switch {
		case b.name != name:
		case !b.memory:
			return "only --backend " + MemoryBackends() + " writes memory snapshots: use it, or drop --snapshot-compression"
		case SessionTransport(name, t) != native.TransportStream:
			return "--backend " + name + " over --agent-transport " + string(SessionTransport(name, t)) + " writes no memory snapshot: use --agent-transport stream (its default), or drop --snapshot-compression"
		default:
			return ""
		}
	}
	return "backend " + name + " is unknown"
}

// HasTransportChoice says backend name ("" is DefaultBackend) takes
// BackendOptions.AgentTransport.
func HasTransportChoice(name string) bool {
	return defaultTransport(name) != ""
}

// defaultTransport is backend name's ("" is DefaultBackend) default agent
// transport, "" for a backend without the choice or an unknown one.
func defaultTransport(name string) native.AgentTransport {
	if name == "" {
		name = DefaultBackend
	}
	for _, b := range backends {
		if b.name == name {
			return b.transport
		}
	}
	return ""
}

// SessionTransport is the agent transport backend name's ("" is
// DefaultBackend) sessions use when t ("" is the backend's default) is
// asked for: the servers key the descriptors they reserve on it. A
// backend without the choice has its own link to its agent, counted as
// descriptors.
func SessionTransport(name string, t native.AgentTransport) native.AgentTransport {
	if t != "" {
		return t
	}
	if d := defaultTransport(name); d != "" {
		return d
	}
	return native.TransportFD
}

// TransportDefaults says which transport each backend with the choice
// defaults to, as help lists it: "fd on native, stream on gvisor".
func TransportDefaults() string {
	var parts []string
	for _, b := range backends {
		if b.transport != "" {
			parts = append(parts, string(b.transport)+" on "+b.name)
		}
	}
	return strings.Join(parts, ", ")
}

// BackendNames returns the backends' names, in the order flags list them.
func BackendNames() []string {
	names := make([]string, len(backends))
	for i, b := range backends {
		names[i] = b.name
	}
	return names
}

// BackendChoices is the backends' names as a help text or an error lists
// them: "native, gvisor, docker or microvm".
func BackendChoices() string {
	return spec.OrList(BackendNames())
}

// NewBackend returns the backend called name ("" is DefaultBackend), or a
// one-line error naming the valid ones.
func NewBackend(name string, o BackendOptions) (Backend, error) {
	if name == "" {
		name = DefaultBackend
	}
	for _, b := range backends {
		if b.name == name {
			if err := checkTransport(name, o.AgentTransport); err != nil {
				return nil, err
			}
			if err := checkCompression(name, o); err != nil {
				return nil, err
			}
			o.AgentTransport = SessionTransport(name, o.AgentTransport)
			return b.make(b.name, o)
		}
	}
	return nil, fmt.Errorf("%w: backend %q is unknown: use %s", spec.ErrInvalid, name, BackendChoices())
}

// checkTransport refuses an unknown agent transport, and the stream
// transport for a backend without the choice, which would ignore it.
func checkTransport(name string, t native.AgentTransport) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("%w: %v", spec.ErrInvalid, err) //nolint:errorlint // ErrInvalid is what callers match
	}
	if t == native.TransportStream && !HasTransportChoice(name) {
		return fmt.Errorf("%w: agent transport %q: only backends %s have a choice of agent transport", spec.ErrInvalid, t, TransportBackends())
	}
	return nil
}

// checkCompression refuses an unknown snapshot compression, and
// gvisor.CompressionFast where the backend, over its transport, writes
// no memory image, which would ignore it.
func checkCompression(name string, o BackendOptions) error {
	if err := o.SnapshotCompression.Validate(); err != nil {
		return fmt.Errorf("%w: %v", spec.ErrInvalid, err) //nolint:errorlint // ErrInvalid is what callers match
	}
	if o.SnapshotCompression != gvisor.CompressionFast {
		return nil
	}
	if why := CompressionUnused(name, o.AgentTransport); why != "" {
		return fmt.Errorf("%w: snapshot compression %s: %s", spec.ErrInvalid, o.SnapshotCompression, why)
	}
	return nil
}

// newNative is the native backend; a server's sessions start from a small
// spawner process instead of forking the server. Native's Name is
// DefaultBackend, the name this table gives it.
func newNative(_ string, o BackendOptions) (Backend, error) {
	if o.Server {
		useSpawner()
	}
	return Native{Logger: o.Logger, Executor: o.Executor, AgentTransport: o.AgentTransport}, nil
}

// newKubernetes is the kubernetes backend, which the server makes
// (BackendOptions.Kubernetes): its sessions are SandboxClaims that
// outlive any one process, so there is nothing for a one-shot run.
func newKubernetes(name string, o BackendOptions) (Backend, error) {
	if o.Kubernetes == nil {
		return nil, fmt.Errorf("%w: backend %s serves sessions only, from a cluster's sandbox Pods: use warden serve --backend %s", spec.ErrInvalid, name, name)
	}
	return o.Kubernetes(name)
}

// ended says the box has ended.
func ended(b Box) bool {
	select {
	case <-b.Done():
		return true
	default:
		return false
	}
}

// runOnce is Run for a backend whose boxes only exist as sessions: a box
// for one exec, closed after it. Timeouts and kills are then exactly a
// session exec's, the same in every backend.
func runOnce(ctx context.Context, b Backend, s spec.Spec, stdin io.Reader, live Stream) (spec.Result, error) {
	if err := s.Validate(); err != nil {
		return spec.Result{}, err
	}
	begin := time.Now()
	box, err := b.Start(ctx, s)
	if err != nil {
		return spec.Result{}, err
	}
	defer box.Close()
	timeout := s.Limits.Timeout
	if timeout <= 0 {
		timeout = spec.MaxTimeout
	}
	r, err := box.Exec(ctx, Command{Argv: s.Command, Stdin: stdin, Timeout: timeout}, live)
	if err != nil && ended(box) {
		err = explainEnd(err, box, b.Name(), s.Limits.MemoryBytes)
	}
	r.Network = box.NetworkEvents()
	r.WallTimeMS = float64(time.Since(begin).Microseconds()) / 1000
	return r, err
}

// settleWait bounds how long settledErr waits for a box's init to exit.
const settleWait = 5 * time.Second

// settledErr is b.Err once b, which has ended, has seen its init exit
// (where the backend tells that, and for at most settleWait): the
// control connection hangs up first, and only the init's exit says why
// it ended (nsinit.EndedCause).
func settledErr(b Box) error {
	if w, ok := b.(interface{ Exited() <-chan struct{} }); ok {
		t := time.NewTimer(settleWait)
		defer t.Stop()
		select {
		case <-w.Exited():
		case <-t.C:
		}
	}
	return b.Err()
}

// explainEnd is err, from an exec during which box ended, with the
// cause: the box's own where the init's exit names one (the sandbox's
// code killed its agent), none where the host killed it for breaking the
// protocol (a stopped agent does), else a hint at --memory, whose excess ends the
// whole box on backends whose OOM killer picks the init.
func explainEnd(err error, box Box, backend string, memory int64) error {
	why := settledErr(box)
	switch {
	case errors.Is(why, nsinit.ErrAgentKilled), errors.Is(why, nsinit.ErrAgentUnlocked):
		return why
	case errors.Is(why, nsinit.ErrProtocol):
		// The host killed it; why is in err already.
		return err
	case memory > 0:
		return fmt.Errorf("%w (the whole sandbox ended during the run; on the %s backend a program over --memory %s ends it)", err, backend, spec.FormatSize(memory))
	}
	return err
}
