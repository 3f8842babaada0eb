// Package nsinit is the sandbox side of the native backend: the program the
// warden binary becomes when re-executed as PID 1 of a fresh set of
// namespaces. It builds the root, sets limits, drops every privilege,
// installs the seccomp filter and starts the user's program, then reports
// how it ended to the host over a socket.
//
// The host and the init talk in JSON lines over a socketpair passed as fd 3:
// the host sends one Config, the init answers with one Status when the
// program has ended (or the sandbox could not be built). The init is inside
// its cgroup before it does any work: born there on cgroup v2, or on v1
// moved there by its own first write to the descriptors at CgroupFD.
package nsinit

// Arg0 is the argv[0] that makes the warden binary run as the init. main
// checks it before anything else, so the init never parses CLI flags.
const Arg0 = "warden-init"

// Descriptors the host passes to the init after stdin, stdout and stderr.
const (
	// ControlFD carries the Config in and the Status out.
	ControlFD = 3
	// WorkspaceFD, when Config.Workspace is set, is an O_PATH descriptor of
	// the host directory to bind at /workspace, or a detached mount of it.
	WorkspaceFD = 4
	// CgroupFD is the first of Config.CgroupFiles descriptors of cgroup v1
	// "tasks" files, opened by the host, into which the init writes "0".
	CgroupFD = 5
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
	Command   []string `json:"command"`
	Env       []string `json:"env"`
	Hostname  string   `json:"hostname"`
	Workspace bool     `json:"workspace"`
	// WorkspacePath is the host path of the workspace, free of links.
	WorkspacePath string `json:"workspace_path"`
	// WorkspaceIsMount says the workspace descriptor is a detached,
	// already idmapped mount rather than a directory.
	WorkspaceIsMount bool `json:"workspace_is_mount"`
	// CgroupFiles is how many cgroup v1 tasks descriptors start at CgroupFD.
	CgroupFiles int     `json:"cgroup_files"`
	DiskBytes   int64   `json:"disk_bytes"`
	Inodes      int64   `json:"inodes"`
	Rlimits     Rlimits `json:"rlimits"`
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
