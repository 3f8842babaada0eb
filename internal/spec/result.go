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
	// limit. The rest was discarded: by the host at a bounded pace (see
	// package drain) when the Go init runs the program, which then ran on
	// slowed to that pace while it flooded; inside the box, unpaced and on
	// the box's own CPU quota, when warden-exec's PID 1 relays the output
	// (its Drain op, a one-shot native run on the fast executor).
	StdoutTruncated bool `json:"stdout_truncated"`
	StderrTruncated bool `json:"stderr_truncated"`
	// WallTimeMS is the run's elapsed time in milliseconds.
	WallTimeMS float64 `json:"wall_time_ms"`
	// QueuedMS is how long a session exec waited for its turn under exec
	// pacing before it started, in milliseconds (not in WallTimeMS).
	// It is left out when zero, as in every one-shot run's Result, whose
	// fields are the CLI's contract.
	QueuedMS float64 `json:"queued_ms,omitempty"`
	// CPUTimeMS is the CPU time of every process of the sandbox.
	CPUTimeMS float64 `json:"cpu_time_ms"`
	// PeakMemoryBytes is the sandbox's highest memory use (cgroup peak, or
	// the largest single process when no memory cgroup is available).
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
	// Error is set only when Warden itself failed; the user's code failing
	// is a normal result with a non-zero ExitCode.
	Error string `json:"error"`

	// The fields below are set only by code run in a persistent
	// interpreter (a session exec with a language).

	// Value is the repr of the code's trailing expression, as a notebook
	// cell shows it; empty when the code ends in a statement or None.
	Value string `json:"value,omitempty"`
	// Exception describes the error the code raised, if it raised one.
	Exception *Exception `json:"exception,omitempty"`
	// Outputs are the rich results the code produced, in order: every
	// figure it drew and every object it displayed.
	Outputs []Output `json:"outputs,omitempty"`
	// InterpreterRestarted says the interpreter died or was killed during
	// this exec (a timeout, a crash, the memory limit): its variables are
	// gone and the next exec starts a fresh one. Files stay.
	InterpreterRestarted bool `json:"interpreter_restarted,omitempty"`

	// Network lists every connection the sandbox asked the egress proxy
	// for, allowed or denied, in order (with --net proxy only).
	Network []NetworkEvent `json:"network,omitempty"`
}

// NetworkEvent is one decision of the egress proxy: what the sandbox asked
// for, where it led, whether it was allowed and why, and the bytes moved.
type NetworkEvent struct {
	// Time is when the request arrived, RFC 3339 with nanoseconds.
	Time string `json:"time"`
	// Method is CONNECT, or the HTTP method of a plain-HTTP request.
	Method string `json:"method"`
	Host   string `json:"host"`
	Port   int    `json:"port"`
	// Address is the IP address dialled (or refused), empty when the
	// request was refused before resolving.
	Address string `json:"address,omitempty"`
	Allowed bool   `json:"allowed"`
	// Reason says which rule allowed it, or why it was denied (no rule,
	// a deny rule, the address class, a limit).
	Reason    string `json:"reason"`
	BytesUp   int64  `json:"bytes_up"`
	BytesDown int64  `json:"bytes_down"`
}

// Exception is an error raised by code in an interpreter, in the shape
// notebooks use: the type's name, its message and the formatted traceback.
type Exception struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
}

// Output is one rich result: a PNG chart, an SVG, an HTML table. Binary
// types (image/png, image/jpeg) carry base64 in Data; text types (SVG,
// HTML, plain text, JSON) carry the text itself, as Encoding says.
type Output struct {
	// MimeType is the result's type, such as "image/png".
	MimeType string `json:"mime_type"`
	// Data is the content, encoded as Encoding says.
	Data string `json:"data"`
	// Encoding is "base64" for binary types and "utf-8" for text.
	Encoding string `json:"encoding"`
}
