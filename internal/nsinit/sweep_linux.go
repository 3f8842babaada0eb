package nsinit

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// sweepOrphans kills what an exec left behind where no exec cgroup finds
// it (a boxed init, cgroup v2): every process the PID namespace handed to
// the agent (its parent is PID 1) that the agent did not start, with its
// process group. A process that left its exec's group by setsid and was
// orphaned is caught here once an exec ends; one whose parent still lives
// belongs to that parent's exec and ends with it.
func sweepOrphans(mine func(pid int) bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 || mine(pid) {
			continue
		}
		if ppid, ok := parentOf(pid); ok && ppid == 1 {
			_ = unix.Kill(-pid, unix.SIGKILL)
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// parentOf reads a process's parent from /proc/PID/stat, whose second
// field (the command) may hold spaces and parentheses: the fields after
// its last ')' are fixed.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	return ppid, err == nil
}
