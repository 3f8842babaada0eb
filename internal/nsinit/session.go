package nsinit

import "fmt"

// Request operations.
const (
	// OpSpawn starts a process of the sandbox user.
	OpSpawn = "spawn"
	// OpKill signals a process started by OpSpawn, and its process group.
	OpKill = "kill"
	// OpFile, over the stream transport only, is one operation on the
	// box's /workspace (Request.File), served by the agent as the
	// sandbox user and answered on a channel of its own.
	OpFile = "file"
	// OpQuiesce, over the stream transport only, readies the stream for
	// a checkpoint of the box (protocol version 11): it is the host's
	// last frame on the stream (streammux's WriteLast); the agent arms
	// its end for a resume with Request.Nonce and answers EventQuiesced
	// as its own last frame. After a restore the new host opens a new
	// stream with a resume frame carrying the nonce, and the agent's
	// first event on it is EventResumed.
	OpQuiesce = "quiesce"
	// OpReattach, over the stream transport only, binds a process the
	// agent listed in EventResumed to new channels: Streams names, in
	// the listing's order, a channel for each of its "in" and "out"
	// streams and StreamNull for each "null" one. It may name each live
	// process once.
	OpReattach = "reattach"
)

// File operations, FileRequest.Op: the one list of them. Each is the
// workspace.Dir method of the same name.
const (
	FileStat   = "stat"
	FileList   = "list"
	FileRead   = "read"
	FileWrite  = "write"
	FileMkdir  = "mkdir"
	FileRemove = "remove"
	FileRename = "rename"
)

// FileOps are the file operations an agent serves.
var FileOps = []string{FileStat, FileList, FileRead, FileWrite, FileMkdir, FileRemove, FileRename}

// FileRequest is one operation on the box's /workspace (Request.File).
// The host opens channel Ch just before the request; a write's content
// follows on it from the host, up to its end; the agent answers on it
// with one framed workspace.Reply and, for a read, the file's bytes
// (exactly the size the reply's entry says), then closes it.
type FileRequest struct {
	Ch uint32 `json:"ch"`
	Op string `json:"op"`
	// Path is the path operated on; To is a rename's destination.
	Path string `json:"path"`
	To   string `json:"to,omitempty"`
	// Mode is a write's permission bits (0 for 0644).
	Mode uint32 `json:"mode,omitempty"`
	// Recursive is a remove's.
	Recursive bool `json:"recursive,omitempty"`
	// MaxFileBytes and MaxEntries are the session's workspace.Limits,
	// which the agent applies as the host would.
	MaxFileBytes int64 `json:"max_file_bytes"`
	MaxEntries   int   `json:"max_entries"`
}

// Request is one order from the host to a session's agent. A spawn's
// descriptors travel attached to the frame: first Files descriptors that
// become the process's fds 0, 1, 2, ..., then Cgroup "tasks" descriptors
// of the exec's own cgroup (v1) to start it in. Over the stream transport
// (Config.Stream) nothing is attached: Streams says what each of the
// process's fds 0, 1, 2, ... is.
type Request struct {
	Op string `json:"op"`
	// ID names the process in the host's books; the agent echoes it.
	ID   uint64   `json:"id"`
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	// Dir is the working directory; empty means /workspace.
	Dir    string `json:"dir,omitempty"`
	Files  int    `json:"files,omitempty"`
	Cgroup int    `json:"cgroup,omitempty"`
	// Signal is what OpKill sends.
	Signal int `json:"signal,omitempty"`
	// Streams, over the stream transport only, are the process's fds 0,
	// 1, 2, ... in order: each a channel the host opened just before this
	// request, or StreamNull.
	Streams []Stream `json:"streams,omitempty"`
	// File is OpFile's operation.
	File *FileRequest `json:"file,omitempty"`
	// Nonce is OpQuiesce's: the hex of the resume frame's nonce
	// (streammux.ResumeNonceLen bytes).
	Nonce string `json:"nonce,omitempty"`
}

// Stream directions: what a process's fd is over the stream transport.
const (
	// StreamIn: the process reads the fd; the host writes the channel.
	StreamIn = "in"
	// StreamOut: the process writes the fd; the host reads the channel.
	StreamOut = "out"
	// StreamNull: an fd at end of file at once (stdin from /dev/null); no
	// channel.
	StreamNull = "null"
)

// KnownStream says whether dir is one of the stream directions.
func KnownStream(dir string) bool {
	return dir == StreamIn || dir == StreamOut || dir == StreamNull
}

// Stream is one fd of a process spawned over the stream transport: a pipe
// in the sandbox whose other end the agent relays to or from channel Ch.
type Stream struct {
	Ch  uint32 `json:"ch,omitempty"`
	Dir string `json:"dir"`
}

// Event kinds the agent reports.
const (
	// EventReady: the sandbox is built and the agent takes requests.
	EventReady = "ready"
	// EventFailed: the sandbox could not be built; Status.Error says why.
	EventFailed = "failed"
	// EventStarted: process ID runs as Pid (in the sandbox's PID namespace).
	EventStarted = "started"
	// EventExited: process ID has ended, or never started (Status.StartFailed).
	EventExited = "exited"
	// EventQuiesced: the agent's answer to OpQuiesce, its last frame on
	// the stream before a checkpoint.
	EventQuiesced = "quiesced"
	// EventResumed: the agent's first event on the stream a new host
	// opened after a restore, listing the processes that still run
	// (Live), for OpReattach.
	EventResumed = "resumed"
)

// MaxLive bounds the processes an EventResumed may list, whatever the
// box: far above any session's. The host bounds the list by what it
// holds of the checkpoint (agent.Frame.Prior): each process listed must
// be one of its unfinished ones, and each at most once.
const MaxLive = 1 << 16

// LiveProcess is a process a restored agent still runs: its spawn ID
// and what each of its fds 0, 1, 2, ... is now: StreamIn or StreamOut
// for a pipe whose relay lives on (waiting for a channel), StreamNull
// for one whose stream had ended or was /dev/null.
type LiveProcess struct {
	ID      uint64   `json:"id"`
	Streams []string `json:"streams"`
}

// Event is one line from the agent.
type Event struct {
	Kind   string  `json:"kind"`
	ID     uint64  `json:"id,omitempty"`
	Pid    int     `json:"pid,omitempty"`
	Status *Status `json:"status,omitempty"`
	// CPUTimeUS and MaxRSSKiB come from the process's rusage, which covers
	// it and every descendant it waited for: the fallback when no cgroup
	// counts the exec.
	CPUTimeUS int64 `json:"cpu_time_us,omitempty"`
	MaxRSSKiB int64 `json:"max_rss_kib,omitempty"`
	// OOMKills, in the started and exited events of an agent whose Config
	// set MemoryEvents, is the oom_kill count of the box's memory cgroup
	// so far: read before the process was forked (started) and after it
	// was reaped (exited). The box counts them because the host cannot
	// read its cgroup (a microVM guest's); the host takes an exec's OOM
	// kills as the difference, and the number as hostile input.
	OOMKills uint64 `json:"oom_kills,omitempty"`
	// Live is EventResumed's list of the processes that still run.
	Live []LiveProcess `json:"live,omitempty"`
}

// MaxRequestFDs bounds the descriptors one Request may carry, and so
// the streams one process is spawned with.
const MaxRequestFDs = 16

// EncodeRequest frames r for SendRequest's single sendmsg: its length,
// then its JSON.
func EncodeRequest(r Request) ([]byte, error) {
	if r.Files+r.Cgroup > MaxRequestFDs {
		return nil, fmt.Errorf("request carries %d descriptors, more than %d", r.Files+r.Cgroup, MaxRequestFDs)
	}
	if len(r.Streams) > MaxRequestFDs {
		return nil, fmt.Errorf("request names %d streams, more than %d", len(r.Streams), MaxRequestFDs)
	}
	return encodeFrame(r)
}
