// Package nsinit is the sandbox side of the native backend: the program the
// warden binary becomes when re-executed as PID 1 of a fresh set of
// namespaces. It builds the root, sets limits, drops every privilege,
// installs the seccomp filter and starts the user's program, then reports
// how it ended to the host over a socket.
//
// The host and the init talk over a socketpair passed as fd 3. The host
// sends one Config (WriteConfig: a magic, the protocol Version, a length,
// then JSON); an init of another version refuses it with one Refusal
// line. On cgroup v1 the host then creates the sandbox's cgroup while the
// init boots and sends one byte carrying the cgroup's "tasks" descriptors
// (SCM_RIGHTS), into which the init writes "0" before any other work (on
// v2 the init is born inside, by CLONE_INTO_CGROUP). The init answers with
// one Status, as a JSON line, when the program has ended or the sandbox
// could not be built.
//
// A session (Config.Session) keeps the init running as the sandbox's agent:
// instead of one Status it answers with Events, one JSON line each, the
// first being EventReady (or one Status-bearing EventFailed), and it serves
// Requests the host sends as frames like the Config's, each with the new
// process's descriptors attached (see SendRequest).
package nsinit

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/strictjson"
)

// Arg0 is the argv[0] that makes the warden binary run as the init. main
// checks it before anything else, so the init never parses CLI flags.
const Arg0 = "warden-init"

// BoxedPath is where backends built on container runtimes put the warden
// binary in the box, and its argv[0] there: PID 1 runs it as
// "BoxedPath BoxedStdin" (the control connection is its stdin) or
// "BoxedPath BoxedConnect SOCKET" (it connects to the host there).
const BoxedPath = "/.warden/warden-init"

// How a boxed init finds its control connection. BoxedPod is BoxedStdin
// in a Kubernetes Pod (internal/podinit): the box is the Pod's container,
// the init runs as the Pod's non-root uid with no capability at all, and
// the user's processes run as that same uid (see podSteps).
const (
	BoxedStdin   = "stdin"
	BoxedConnect = "connect"
	BoxedPod     = "pod-stdin"
)

// IsInit says argv is the init's, native or boxed.
func IsInit(argv []string) bool {
	return len(argv) > 0 && (argv[0] == Arg0 || argv[0] == BoxedPath)
}

// ProbeArg, as an init's only argument after Arg0, makes it print its
// protocol Version and exit: how warden checks the warden-init beside it
// before it trusts it with a sandbox. An init from before versioning has
// no such argument and exits 111 for want of its control socket.
const ProbeArg = "--protocol-version"

// IsProbe says argv asks an init for its protocol version.
func IsProbe(argv []string) bool {
	return len(argv) == 2 && argv[0] == Arg0 && argv[1] == ProbeArg
}

// Descriptors the host passes to the init after stdin, stdout and stderr.
const (
	// ControlFD carries the Config in and the Status out.
	ControlFD = 3
	// WorkspaceFD, when Config.Workspace is set, is an O_PATH descriptor of
	// the host directory to bind at /workspace, or a detached mount of it.
	WorkspaceFD = 4
	// EgressFD, when Config.EgressPort is set, is an O_PATH descriptor of
	// the unix socket of the sandbox's egress proxy, outside its root.
	EgressFD = 5
	// RootFD, when Config.Root is set, is the template's root tree: a
	// detached mount of it (RootIsMount) or an O_PATH descriptor of the
	// directory, which the init opens again by path (rootless).
	RootFD = 6
	// SeedFD, when Config.SeedMount is set, is a detached, read-only mount
	// of the template's root tree, idmapped so that its files (root's on
	// the host, so nobody's through RootFD, where an owner-only file
	// cannot be read) are the sandbox user's: the init copies the
	// template's home and /workspace from it into the scratch, then drops
	// it with the scratch; it is never attached in the sandbox's root.
	SeedFD = 7
	// MemoryEventsFD, when Config.MemoryEvents is set, is the memory.events
	// file of the cgroup v2 a microVM's guest init made for the box (its
	// memory.max the box's --memory) and moved itself into before it
	// became the agent: the agent reads the box's OOM kills there, since
	// the host cannot (Event.OOMKills). Above every descriptor the host
	// passes, so no move onto those numbers closes it. It is UsageFD's
	// number too: the two never meet, as only a boxed session has memory
	// events and ExecPlan refuses sessions and boxed Configs.
	MemoryEventsFD = 9
	// EtcFD is where a plan holds the /etc template while it builds the
	// root (rootfs.EtcFD); listed here so that no descriptor above takes
	// it.
	EtcFD = rootfs.EtcFD
)

// SandboxUID and SandboxGID are the identity of the user's code inside the
// sandbox; each sandbox maps them to its own host ids.
const (
	SandboxUID = 1000
	SandboxGID = 1000
)

// Config is everything the init needs to build the sandbox and start the
// program. It is plain data: the host decides, the init carries out.
type Config struct {
	Command  []string `json:"command"`
	Env      []string `json:"env"`
	Hostname string   `json:"hostname"`
	// Etc is the host's /etc template for this hostname, bound read-only
	// at /etc (see rootfs.SharedEtc); a boxed init has none.
	Etc rootfs.EtcTemplate `json:"etc,omitzero"`
	// View is the machine the sandbox sees: its memory limit and CPU
	// count in /proc and /sys (native), and as many CPUs in the
	// affinity of every process it starts (every backend).
	View rootfs.View `json:"view,omitzero"`
	// HomeFiles are written into the sandbox's fresh HOME (see
	// rootfs.Options.HomeFiles): the root's prebuilt matplotlib font
	// list (internal/fontcache).
	HomeFiles []rootfs.HomeFile `json:"home_files,omitempty"`
	// Devices is the host directory the init binds its device nodes
	// from (rootfs.SharedDevices); empty means the host's /dev.
	Devices string `json:"devices,omitempty"`
	// Root is the host path of the template's root tree the sandbox
	// runs on (spec.Root.Dir), at RootFD; empty means the host's /usr
	// and the Etc template.
	Root string `json:"root,omitempty"`
	// RootIsMount says RootFD is a detached mount of Root, which a
	// sandbox user could not reach by path in a store only root may
	// enter.
	RootIsMount bool `json:"root_is_mount,omitempty"`
	Workspace   bool `json:"workspace"`
	// WorkspacePath is the host path of the workspace, free of links.
	WorkspacePath string `json:"workspace_path"`
	// WorkspaceIsMount says the workspace descriptor is a detached,
	// already idmapped mount rather than a directory.
	WorkspaceIsMount bool `json:"workspace_is_mount"`
	// Template names the template Root is, for the init's errors (a home
	// too large to copy names it); empty on the host's root.
	Template string `json:"template,omitempty"`
	// SeedMount says SeedFD holds the template's tree to copy the home
	// and /workspace from (see SeedFD); without it they are copied from
	// RootFD's (rootless: the tree is the invoking user's own).
	SeedMount bool `json:"seed_mount,omitempty"`
	// HostScratch says the workspace descriptor is a whole scratch tmpfs
	// from the host (spec.Spec.Scratch), whose subdirectories become
	// /workspace, /tmp, HOME and /dev/shm.
	HostScratch bool `json:"host_scratch"`
	// AwaitCgroup says the host sends the cgroup's tasks descriptors
	// after the Config, and the init must join before any work.
	AwaitCgroup bool `json:"await_cgroup"`
	// EgressPort, when not zero, is the port on the sandbox's loopback
	// where the init bridges each connection to the egress proxy.
	EgressPort int `json:"egress_port,omitempty"`
	// EgressRate and EgressBurst pace the bridge (connections a second,
	// after a burst; see egress.ConnPace): past them it hands nothing on
	// and connections wait in the sandbox's own backlog. Zero rate: not
	// paced.
	EgressRate  float64 `json:"egress_rate,omitempty"`
	EgressBurst int     `json:"egress_burst,omitempty"`
	// Session makes the init stay as the sandbox's agent, starting a
	// process for each Request, instead of running Command once.
	Session bool `json:"session,omitempty"`
	// Rootless says the host runs as an ordinary user, so the init is
	// not root over its IPC namespace and may not set its sysctls: a
	// rootless session skips LimitSessionIPC (see limitsSessionIPC).
	Rootless bool `json:"rootless,omitempty"`
	// Boxed says a container runtime built the box (see BoxedPath): the
	// init skips the steps that build it. With EgressPort, the host then
	// sends a connection to its egress link after the Config, and
	// EgressRelay says the bridge must copy bytes to the proxy because
	// the box cannot hand a socket to the host (gVisor's are its own).
	Boxed       bool `json:"boxed,omitempty"`
	EgressRelay bool `json:"egress_relay,omitempty"`
	// HideAgent, in a boxed Config, says the box's kernel does not keep
	// the agent from the user (gVisor's: every task's /proc files readable
	// by every user, setpriority and sched_setaffinity of any task
	// allowed, devices the native box lacks), so the agent must: it
	// removes the devices (hideAgent) and serves the session from a PID
	// namespace of the user's own (serveThroughUserAgent); the runtime
	// gives it CAP_SYS_ADMIN for that, which it then drops.
	HideAgent bool `json:"hide_agent,omitempty"`
	// Stream, in a session's Config, says the control connection carries
	// a streammux stream (streammux.DefaultConfig, the host its
	// initiator) once this Config is read: for a box that cannot be
	// handed descriptors (a VM's serial port, a pod's TCP connection).
	// The host opens channel 1 first, for requests in and events out as
	// on the bare connection, and before each spawn a channel per stream
	// of the process (Request.Streams) instead of passing descriptors.
	Stream bool `json:"stream,omitempty"`
	// KernelSysinfo, in a boxed Config, says the box's kernel answers
	// sysinfo(2) with the box's own figures (gVisor's), so the seccomp
	// filter lets it through (seccomp.InstallOnThread). Otherwise the
	// kernel is the host's, and the init answers the call itself
	// (seccomp.InstallNotifying, answerer).
	KernelSysinfo bool `json:"kernel_sysinfo,omitempty"`
	// MemoryEvents, in a boxed session's Config, says MemoryEventsFD is
	// open on the box's memory cgroup's memory.events: the agent reports
	// the cgroup's oom_kill count in every started and exited event. A
	// microVM's guest sets the cgroup up; the host cannot read it.
	MemoryEvents bool `json:"memory_events,omitempty"`
	// UID and GID, when set in a boxed Config, replace SandboxUID and
	// SandboxGID for the user's processes (see userUID).
	UID       int     `json:"uid,omitempty"`
	GID       int     `json:"gid,omitempty"`
	DiskBytes int64   `json:"disk_bytes"`
	Inodes    int64   `json:"inodes"`
	Rlimits   Rlimits `json:"rlimits"`
}

// Rlimits are per-process limits set before the program starts; zero
// leaves a limit as inherited.
type Rlimits struct {
	CPUSeconds    uint64 `json:"cpu_seconds"`
	FileSizeBytes uint64 `json:"file_size_bytes"`
	OpenFiles     uint64 `json:"open_files"`
	Processes     uint64 `json:"processes"`
}

// Status is how the program ended, or why it never started.
type Status struct {
	// ExitCode is the program's exit status, or 128+N for signal N.
	ExitCode int `json:"exit_code"`
	// Signal is the number of the signal that killed it, or 0.
	Signal int `json:"signal"`
	// StartFailed is set when the program could not be started (not found,
	// not executable, a missing interpreter): a failure of the program, not
	// of Warden. ExitCode is then 127 or 126, as a shell would say, and
	// Error says why.
	StartFailed bool `json:"start_failed,omitempty"`
	// Error says why the sandbox could not be built (the step is named),
	// or with StartFailed why the program could not start.
	Error string `json:"error,omitempty"`
}

// maxConfig bounds a Config on the wire: far above any command line and
// environment execve accepts, far below memory worth worrying about.
const maxConfig = 16 << 20

// Version is the version of the protocol between warden and warden-init:
// the init's messages (Config with Rlimits and rootfs.EtcTemplate, Status,
// Refusal, Event, Request) and the spawner's (package spawn: its request
// with Init and idMap, its reply with Exit). warden-init is a separate
// file beside warden and may come from another build, so the host sends
// its version in front of the Config and each spawner request, and an init
// of any other version refuses rather than run with settings it reads
// differently. Bump it with every change to those messages; the golden
// test in package spawn (testdata/protocol.golden) fails until then. A
// warden from before protocol versioning sends no version at all.
const Version = 11

// configMagic opens every Config frame, before the version. An init from
// before versioning reads it as a length far past maxConfig and exits
// without running anything, so no init ever acts on a Config it cannot
// read whole.
var configMagic = [4]byte{'W', 'D', 'N', 'C'}

// WriteConfig sends c as one frame: configMagic, Version, its length, then
// its JSON. The frame lets the init read exactly the Config and nothing
// after it, so the bytes that carry descriptors (see AwaitCgroup) are left
// for recvmsg.
func WriteConfig(w io.Writer, c Config) error {
	frame, err := encodeFrame(c)
	if err != nil {
		return err
	}
	head := binary.BigEndian.AppendUint32(configMagic[:], Version)
	_, err = w.Write(append(head, frame...))
	return err
}

// encodeFrame is v's JSON behind its 4-byte length, the framing of every
// message the host sends.
func encodeFrame(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfig {
		return nil, fmt.Errorf("message of %d bytes is larger than %d", len(b), maxConfig)
	}
	return append(binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b))), b...), nil
}

// reinstall is what to do about an init that does not speak the host's
// protocol.
const reinstall = "reinstall warden-init from the same build as warden"

// readConfig reads one frame written by WriteConfig. An init of another
// version, or a Config with a field this build does not know, is an error
// that says to reinstall warden-init.
func readConfig(r io.Reader) (Config, error) {
	var c Config
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return c, err
	}
	if head != configMagic {
		return c, fmt.Errorf("warden-init (protocol version %d) got a configuration it cannot read, from a warden from before protocol versioning: %s", Version, reinstall)
	}
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return c, err
	}
	if v := binary.BigEndian.Uint32(head[:]); v != Version {
		return c, fmt.Errorf("warden-init speaks protocol version %d but warden sent version %d: %s", Version, v, reinstall)
	}
	body, err := readFrame(r)
	if err != nil {
		return c, err
	}
	if err := strictjson.Decode(body, &c); err != nil {
		return c, fmt.Errorf("reading the configuration: %w (%s)", err, reinstall)
	}
	if c.HideAgent && !c.KernelSysinfo {
		return c, errAgentWithoutKernelSysinfo
	}
	if c.Stream && !c.Session {
		return c, errStreamNotServed
	}
	if c.MemoryEvents && (!c.Session || !c.Boxed) {
		return c, errMemoryEventsNotBoxed
	}
	return c, nil
}

// errStreamNotServed refuses a stream transport the init would not serve:
// only a session's agent speaks it (its own, or the user's agent behind
// HideAgent, which then serves the stream the same way).
var errStreamNotServed = errors.New("the configuration asks for the stream transport (stream) outside a session: only a session's agent serves the stream")

// errMemoryEventsNotBoxed refuses OOM reports from the box outside a
// boxed session: only a boxed agent (a microVM guest's) is handed its
// box's memory.events; native's host reads the cgroup itself.
var errMemoryEventsNotBoxed = errors.New("the configuration asks the agent to report its box's OOM kills (memory_events) outside a boxed session: only a microVM guest's agent has its box's memory.events")

// errAgentWithoutKernelSysinfo refuses a box that would hide its agent
// behind the user's agent on a kernel that does not answer sysinfo(2)
// itself: both agents lock down with the filter that lets the call through
// (userAgentConfig), so on the host's kernel the sandbox would read the
// host's figures. Only gVisor hides the agent, and its kernel answers.
var errAgentWithoutKernelSysinfo = errors.New("the configuration asks to hide the agent (hide_agent) on a kernel that does not answer sysinfo(2) itself (kernel_sysinfo false): only gVisor boxes may hide the agent")

// readFrame reads one length-prefixed frame's body.
func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxConfig {
		return nil, fmt.Errorf("config of %d bytes is larger than %d", size, maxConfig)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}
