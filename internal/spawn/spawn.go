// Package spawn starts sandbox inits for a long-lived Warden process (warden
// serve, warden mcp) from a small helper process, the spawner, instead of
// from the server itself.
//
// An init is cloned into a new user namespace, so the clone cannot use
// vfork: the whole parent is forked, page tables and all, and the parent
// then takes copy-on-write faults on every page it touches. A server
// holding hundreds of sessions is a large, busy process; the spawner is a
// copy of warden-init (a few MiB) that does nothing else. The server keeps
// one, connected by a socket pair; the spawner forks each init, hands back
// its pid and a pidfd, reaps it, and says when it has exited.
//
// Lifetimes chain: the spawner carries a parent-death signal tied to the
// server, and each init one tied to the spawner, so however the server
// dies, everything it started dies too. If the spawner dies, every init
// dies with it (their sessions end), and the next start makes a new one.
package spawn

import (
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// Arg0 is the argv[0] that makes warden or warden-init run as the spawner.
const Arg0 = "warden-spawner"

// IsSpawner says whether argv asks this process to be the spawner.
func IsSpawner(argv []string) bool { return len(argv) > 0 && argv[0] == Arg0 }

// Init is how to start one sandbox init: its id mappings, namespaces and
// capabilities; the spawner runs its own init binary with argv[0]
// nsinit.Arg0, as the server would, or warden-exec when Exec says so.
type Init struct {
	// UID and GID are the host ids the sandbox user maps to.
	UID, GID int
	// Setgroups allows setgroups(2) in the user namespace (not rootless).
	Setgroups   bool
	Cloneflags  uintptr
	AmbientCaps []uintptr
	// Exec starts warden-exec (a one-shot run's plan follows on the
	// control socket) instead of the Go init. Whoever runs Command finds
	// it beside its own executable under the init's trust rule
	// (nsinit.Executor): a request names no path to run.
	Exec bool
	// Unshares (with Exec) starts warden-exec in the starter's own
	// namespaces, and it makes the sandbox's itself (Unshare), so that
	// Go can vfork it rather than copy the starter's page tables, as a
	// clone into a new user namespace must. warden run's own start sets
	// it; the spawner, a small process, clones as before, so a request
	// never carries it.
	Unshares bool `json:"-"`
}

// ErrDied reports that the spawner died with requests outstanding; the
// inits it had started died with it.
var ErrDied = errors.New("the sandbox spawner process died")

// ErrNoDescriptors reports that the server (or its spawner) could not open
// or receive a descriptor a request needed: it was at its RLIMIT_NOFILE,
// or the host at its file limit. A message whose descriptors the kernel
// dropped for that (MSG_CTRUNC) still arrives whole. Only that request
// fails; the connection and every init stay as they were.
var ErrNoDescriptors = errors.New("the server is out of file descriptors (EMFILE); retry once connections have closed")

// OutOfDescriptors says err is a shortage of descriptors: ErrNoDescriptors,
// or the kernel refusing a new one (EMFILE for the process, ENFILE for
// the host). It is the one list of them.
func OutOfDescriptors(err error) bool {
	return errors.Is(err, ErrNoDescriptors) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// request and reply are the messages on the socket pair, one JSON object
// per datagram with its descriptors beside it.
type request struct {
	ID uint64 `json:"id"`
	// Version is the server's nsinit.Version: the spawner is warden-init,
	// which may come from another build, and refuses any other.
	Version uint32 `json:"version"`
	Kind    string `json:"kind"` // "init" or "userns"
	Init    Init   `json:"init"`
	// Extra says which of the init's descriptors from fd 3 on were sent
	// (false leaves that number closed); Cgroup, that a cgroup directory
	// to clone into follows them.
	Extra  []bool `json:"extra,omitempty"`
	Cgroup bool   `json:"cgroup,omitempty"`
	// Map is the userns kind's one mapping: inside ids to host ids.
	Map idMap `json:"map"`
}

type idMap struct {
	InsideUID, HostUID, InsideGID, HostGID int
}

// reply is the spawner's answer to a request. Its id and error fields are
// frozen across versions, like nsinit.Refusal: a spawner of another build
// answers every request with a reply that has only them, saying to
// reinstall, and a server of any build must read that as the request's
// failure.
type reply struct {
	ID     uint64 `json:"id"`
	Pid    int    `json:"pid,omitempty"`
	Exited bool   `json:"exited,omitempty"`
	Exit   *Exit  `json:"exit,omitempty"`
	Error  string `json:"error,omitempty"`
	// NoDescriptors says the request failed for want of descriptors in
	// the spawner (see ErrNoDescriptors), which the client reports as
	// such: retryable.
	NoDescriptors bool `json:"no_descriptors,omitempty"`
	// NoExecutor says an Exec request found no warden-exec to start
	// (nsinit.ErrNoExecutor), which the client reports as such, so
	// auto may take the Go init.
	NoExecutor bool `json:"no_executor,omitempty"`
}

// failure is the reply to request id that failed with err.
func failure(id uint64, err error) reply {
	if OutOfDescriptors(err) {
		return reply{ID: id, NoDescriptors: true,
			Error: "the sandbox spawner is out of file descriptors (" + err.Error() + "); retry once connections have closed"}
	}
	return reply{ID: id, Error: err.Error(), NoExecutor: errors.Is(err, nsinit.ErrNoExecutor)}
}

// unreadable is the reply to a request the spawner could not decode: of
// another version, or with a field it does not know. Its ID is read
// leniently, as the one field every version has.
func unreadable(raw []byte, err error) reply {
	var head struct {
		ID      uint64 `json:"id"`
		Version uint32 `json:"version"`
	}
	// A reply that does not parse at all leaves head zero, which is
	// answered below as version 0's.
	_ = json.Unmarshal(raw, &head)
	if head.Version != nsinit.Version {
		return versionMismatch(head.ID, head.Version)
	}
	return reply{ID: head.ID, Error: fmt.Sprintf("the sandbox spawner could not read the request: %v (%s)", err, reinstall)}
}

// versionMismatch is the reply to request id from a server of another
// protocol version, or from before protocol versioning (version 0: the
// field is missing).
func versionMismatch(id uint64, version uint32) reply {
	sent := fmt.Sprintf("warden sent version %d", version)
	if version == 0 {
		sent = "warden is from before protocol versioning"
	}
	return reply{ID: id, Error: fmt.Sprintf("the sandbox spawner (warden-init) speaks protocol version %d but %s: %s",
		nsinit.Version, sent, reinstall)}
}

// reinstall is what to do about a spawner of another build.
const reinstall = "reinstall warden-init from the same build as warden"

// err is the error a failed reply stands for, which matches
// ErrNoDescriptors when the spawner ran out of them.
func (r reply) err() error {
	if r.NoDescriptors {
		return spawnerShortage(r.Error)
	}
	if r.NoExecutor {
		return spawnerNoExecutor(r.Error)
	}
	return errors.New(r.Error)
}

// spawnerShortage is the spawner's failure for want of descriptors, in its
// own words.
type spawnerShortage string

func (e spawnerShortage) Error() string { return string(e) }

// Is makes it match ErrNoDescriptors.
func (e spawnerShortage) Is(target error) bool { return target == ErrNoDescriptors }

// Exit is how an init ended, as the process that reaped it saw it.
type Exit struct {
	Status syscall.WaitStatus
	Rusage syscall.Rusage
}

// CPU is the user and system time of the init and everything it reaped.
func (e *Exit) CPU() time.Duration {
	return time.Duration(e.Rusage.Utime.Nano() + e.Rusage.Stime.Nano())
}

// String says how the init ended, as os.ProcessState does.
func (e *Exit) String() string {
	if e == nil {
		return "how is unknown: its spawner died"
	}
	switch s := e.Status; {
	case s.Exited():
		return fmt.Sprintf("exit status %d", s.ExitStatus())
	case s.Signaled():
		return "signal: " + s.Signal().String()
	}
	return fmt.Sprintf("wait status %#x", int(e.Status))
}

// Sizes of one datagram: a request or reply is well under this, and an
// init takes at most eight descriptors.
const (
	maxMessage = 16 << 10
	maxFDs     = 16
)

// spawnerNoExecutor is the spawner's failure to find warden-exec, in its
// own words; it matches nsinit.ErrNoExecutor.
type spawnerNoExecutor string

func (e spawnerNoExecutor) Error() string { return string(e) }

// Is makes a spawnerNoExecutor match nsinit.ErrNoExecutor.
func (e spawnerNoExecutor) Is(target error) bool { return target == nsinit.ErrNoExecutor }
