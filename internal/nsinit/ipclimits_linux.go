package nsinit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
)

// ShmRmidForcedPath is the sysctl that makes the kernel remove a SysV
// shared memory segment once no process is attached to it and its creator
// has exited, instead of keeping it until IPC_RMID.
const ShmRmidForcedPath = "/proc/sys/kernel/shm_rmid_forced"

// MsgQueues is the most SysV message queues a session's IPC namespace
// holds (kernel.msgmni; the kernel's default is 32000). A queue outlives
// its process and its messages are kernel memory charged to the session's
// cgroup, never reclaimed: with the default 16 KiB a queue (kernel.msgmnb,
// which also bounds its message count, each with a 64-byte header)
// MsgQueues queues pin about 9 MiB at most, where 32000 queues could fill
// any --memory and wedge the session.
const MsgQueues = 8

// sessionIPC are the sysctls a session's init sets in the session's own
// IPC namespace, on the native backend and in the microVM's guest: the
// one list for both.
var sessionIPC = []struct{ path, value string }{
	{ShmRmidForcedPath, "1"},
	{"/proc/sys/kernel/msgmni", strconv.Itoa(MsgQueues)},
	{"/proc/sys/kernel/msgmnb", "16384"},
}

// LimitSessionIPC sets sessionIPC in the caller's IPC namespace, so SysV
// objects a finished process left cannot fill the session's memory: a
// shared memory segment goes once its creator has exited and nothing is
// attached, and message queues are few and small. Only a process that is
// root over the namespace may (see limitsSessionIPC).
func LimitSessionIPC() error {
	for _, c := range sessionIPC {
		err := os.WriteFile(c.path, []byte(c.value), 0)
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("setting %s: %w (the init is not root over its IPC namespace: a host not running as root must set Config.Rootless)", c.path, err)
		}
		if err != nil {
			return fmt.Errorf("setting %s: %w", c.path, err)
		}
	}
	return nil
}

// limitsSessionIPC says whether the init runs LimitSessionIPC: only a
// session outlives its processes, and only a rootful host's init is root
// over the IPC namespace (the kernel lets only the euid its owner maps to
// 0 write an IPC sysctl; a rootless box maps just the sandbox's uid, so
// the write fails with EACCES). Rootless, SysV objects a finished exec
// left stay charged to the session's cgroup until they are removed or the
// session ends (docs/protocol.md).
func limitsSessionIPC(cfg *Config) bool {
	return cfg.Session && !cfg.Rootless
}

// limitSessionIPC is the init's step: LimitSessionIPC when
// limitsSessionIPC says so.
func limitSessionIPC(cfg *Config) error {
	if !limitsSessionIPC(cfg) {
		return nil
	}
	return LimitSessionIPC()
}
