package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/egress"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Frame is what a backend built around a session's agent, and everything
// the host side of the protocol needs from it. Building and tearing down
// the box is the backend's whole job; the agent inside and this package
// are the same whatever the box is (namespaces, gVisor, a container).
type Frame struct {
	// Spec is the sandbox's spec; its Limits bound every exec.
	Spec spec.Spec
	// Control is the host's end of the connection to the agent, which has
	// already been sent its Config. The session owns it from Attach on.
	Control *os.File
	// Stream says Control is a byte stream that can carry no descriptor
	// (a VM's serial port, a pod's TCP connection): the agent was sent a
	// Config with Stream set, and the session speaks the protocol over a
	// streammux stream on it (see stream_linux.go). The host still reads
	// and kills Cgroup, but no exec gets a child cgroup (its tasks
	// descriptors could not reach the agent): execs are killed by process
	// group, their orphans swept, their figures rusage's.
	Stream bool
	// Cgroup is the box's cgroup when the host manages one, or nil. The
	// host divides it into per-exec children on v1 unless Stream is set:
	// a stream session's Cgroup is read and killed whole (an exec's OOM
	// kills are those it counted during the exec), never divided. Without
	// one, or undivided, execs are killed by process group and measured
	// by rusage.
	Cgroup cgroup.Cgroup
	// GuestOOMs says the box counts its own OOM kills, in a memory cgroup
	// the host cannot read (a microVM guest's): its agent was sent a
	// Config with MemoryEvents and reports the cgroup's oom_kill count in
	// every started and exited event. The session takes an exec's kills
	// as the count's rise from its start to its end, and Usage's as the
	// highest count reported; a box without GuestOOMs that reports one
	// breaks the protocol. The box may lie about its own kills, which
	// only its own results show; Cgroup is nil then.
	GuestOOMs bool
	// UID and GID are the host ids host-side access to the workspace must
	// act as (see Session.FileOwner).
	UID, GID int
	// Egress is the box's attachment to the egress proxy, or nil.
	Egress *egress.Attachment
	// EgressChannels says the box's egress bridge reaches Egress by
	// opening stream channels (a boxed init over the stream), which the
	// session relays to the proxy. Only such a box may open channels: one
	// whose bridge has its own way to the proxy (native's descriptor)
	// opening one is a breach, as is any box without Egress.
	EgressChannels bool
	// Env makes a process's environment from the spec's and extra ones.
	Env func(extra []string) []string
	// OpenWorkspace opens the box's /workspace, once the agent is ready,
	// as an O_PATH directory the host reaches files through; it must make
	// sure the descriptor is this box's and no one else's. It is nil for
	// a box whose files are not on this host (a Pod's): Workspace is then
	// nil, and the host reaches no file of the box but through its
	// processes.
	OpenWorkspace func() (*os.File, error)
	// FilesByAgent, with Stream, has the file API served by the agent
	// (RemoteFiles) though OpenWorkspace gives the host the files too:
	// native's stream transport, which proves and measures the path a
	// box whose files are not on this host (a Pod's) takes. Snapshots
	// still copy through Workspace.
	FilesByAgent bool
	// Kill kills everything in the box; Exited is closed once its agent
	// has ended. Cleanup then removes every trace of the box on the host.
	Kill    func()
	Exited  <-chan struct{}
	Cleanup func()
	// Ended says how the box's init ended ("signal: killed"), once
	// Exited is closed, for the session's Err; nil where the backend
	// cannot tell.
	Ended func() string
	// ExitCode is the box's init's exit code once Exited is closed (-1
	// when a signal ended it), which tells an init of another build; nil
	// where the backend cannot tell.
	ExitCode func() int
	// Pause and Resume stop every process of the box where it stands,
	// keeping its memory, and let them run again (runsc pause, the Docker
	// Engine's pause); nil where the box's Cgroup does it (native), or
	// where the backend cannot, and Session.Pause then says so. Both are
	// bounded by ctx.
	Pause, Resume func(ctx context.Context) error
	// KillsPaused says Kill ends a paused box where it stands, without
	// letting it run again: teardown then skips the Resume it would run
	// first, which let the box's code run between the resume and the
	// kill (a kill for a breach included).
	KillsPaused bool
	// Restored says the agent was restored from a checkpoint (gVisor's
	// runsc restore) and serves already: it sends no ready event, so
	// Attach waits for none. PriorIDs is the last process ID the session
	// before the checkpoint gave out (Session.LastID): this session's IDs
	// start above it. Prior holds the processes of that session that had
	// not reported all their events (Session.Unfinished): the events they
	// still owe, each at most once, are dropped, since no host book holds
	// them any more (such a process, a server the session started, is the
	// box's now, as any orphan is); any other event of an ID up to
	// PriorIDs breaks the protocol.
	//
	// Over the stream (Stream), a restored agent's old stream was
	// quiesced for the checkpoint (Session.Quiesce): the session opens a
	// new one with a resume frame carrying ResumeNonce, the nonce
	// Quiesce returned, and Attach waits for the agent's resumed event,
	// which lists the processes that still run (Session.Live) for Adopt.
	// An ID listed there that is not one of Prior's breaks the protocol.
	Restored    bool
	PriorIDs    uint64
	Prior       Unfinished
	ResumeNonce []byte
	// Log receives the session's cleanup warnings (an exec's cgroup or
	// process it could not remove), carrying the backend's attributes for
	// the box (nil: slog.Default()).
	Log *slog.Logger
}

// log is the session's logger.
func (s *Session) log() *slog.Logger {
	if s.f.Log == nil {
		return slog.Default()
	}
	return s.f.Log
}

// BoxedConfig is the Config a boxed init gets for a session of s: the
// same limits as native's, the box itself built by the runtime. Processes
// is left to the box's pids cgroup where uid 1000 is shared with other
// boxes on the host (a container without a user namespace), since
// RLIMIT_NPROC counts per host user.
func BoxedConfig(s spec.Spec, relay, nproc bool) nsinit.Config {
	l := s.Limits
	cfg := nsinit.Config{
		Session: true, Boxed: true, Hostname: Hostname, View: View(l),
		Env: ImageEnv(s.Network.Mode == spec.NetProxy, s.Root.Env, s.Env),
		Rlimits: nsinit.Rlimits{
			CPUSeconds:    uint64(l.CPUTime / time.Second),
			FileSizeBytes: uint64(l.FileSizeBytes),
			OpenFiles:     uint64(l.OpenFiles),
		},
	}
	if nproc {
		cfg.Rlimits.Processes = uint64(l.Pids)
	}
	if s.Network.Mode == spec.NetProxy {
		cfg.EgressPort, cfg.EgressRelay = EgressPort, relay
		pace := egress.ConnPace(l.CPUs)
		cfg.EgressRate, cfg.EgressBurst = pace.Rate, pace.Burst
	}
	return cfg
}

// HandOverBoxed sends a boxed init its Config on ctl and, when the box
// has the egress proxy (att), the egress link it asks for connections on,
// which is then served until the init closes it. Over the stream
// transport (cfg.Stream) there is no link: the session serves each
// connection as a channel the box opens.
func HandOverBoxed(ctl *os.File, cfg nsinit.Config, att *egress.Attachment) error {
	if err := nsinit.WriteConfig(ctl, cfg); err != nil {
		return fmt.Errorf("sending sandbox config: %w", err)
	}
	if att == nil || cfg.Stream {
		// Over the stream each connection is a channel the session
		// serves (Frame.Egress).
		return nil
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "egress link"), os.NewFile(uintptr(fds[1]), "egress link")
	defer theirs.Close()
	if err := unix.Sendmsg(int(ctl.Fd()), []byte{0}, unix.UnixRights(int(theirs.Fd())), nil, unix.MSG_NOSIGNAL); err != nil {
		mine.Close()
		return fmt.Errorf("sending the egress link: %w", err)
	}
	go ServeEgressLink(mine, att)
	return nil
}
