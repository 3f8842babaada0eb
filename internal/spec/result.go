package spec

// Result is what happened to one run. Its JSON field names are a contract
// shared with the HTTP API, the SDK and the tests.
type Result struct {
	// ExitCode is the program's exit status, or 128+N when signal N killed it.
	ExitCode int `json:"exit_code"`
	// Signal names the signal that killed the program ("SIGKILL"), if any.
	Signal string `json:"signal"`
	// TimedOut is set when Warden killed the sandbox at its wall-clock limit.
	TimedOut bool `json:"timed_out"`
	// OOMKilled is set when the kernel killed a process at the memory limit.
	OOMKilled bool `json:"oom_killed"`
	// Stdout and Stderr hold the captured output, up to the output limit.
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// StdoutTruncated and StderrTruncated say that output went past the
	// limit; the rest was read and discarded so the program never blocked.
	StdoutTruncated bool `json:"stdout_truncated"`
	StderrTruncated bool `json:"stderr_truncated"`
	// WallTimeMS is the run's elapsed time in milliseconds.
	WallTimeMS float64 `json:"wall_time_ms"`
	// CPUTimeMS is the CPU time of every process of the sandbox.
	CPUTimeMS float64 `json:"cpu_time_ms"`
	// PeakMemoryBytes is the sandbox's highest memory use (cgroup peak, or
	// the largest single process when no memory cgroup is available).
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
	// Error is set only when Warden itself failed; the user's code failing
	// is a normal result with a non-zero ExitCode.
	Error string `json:"error"`
}
