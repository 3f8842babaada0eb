package boxname

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// self is this process's Owner, read once.
var self = sync.OnceValues(func() (Owner, error) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return Owner{}, fmt.Errorf("reading the boot id: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return Owner{}, fmt.Errorf("reading the pid namespace: %w", err)
	}
	pid := os.Getpid()
	start, _, err := startTime(pid)
	if err != nil {
		return Owner{}, err
	}
	return Owner{Boot: strings.TrimSpace(string(boot)), PidNS: st.Ino, PID: pid, Start: start}, nil
})

// Self is this process's Owner, for the labels of what it makes.
func Self() (Owner, error) { return self() }

// Judge says whether o, an Owner read from a label, is this Warden or
// another that runs (OwnerLive), one that is gone (OwnerDead: from an earlier boot,
// or in this pid namespace with its pid gone or reused), or one this
// Warden cannot judge (OwnerForeign: another pid namespace). Should this
// process's own identity be unreadable, nothing is judged dead.
func Judge(o Owner) Verdict {
	me, err := self()
	if err != nil {
		return OwnerForeign
	}
	return judge(me, o, startTime)
}

// startTime reads field 22 of /proc/<pid>/stat, the process's start in
// clock ticks after boot, and whether the pid is gone.
func startTime(pid int) (uint64, bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading pid %d's start time: %w", pid, err)
	}
	// Fields after the command (in parentheses, and it may hold spaces)
	// start at field 3, so field 22 is the 20th.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 20 {
		return 0, false, fmt.Errorf("pid %d's stat has %d fields after the command, want 20 or more", pid, len(fields))
	}
	t, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("pid %d's start time: %w", pid, err)
	}
	return t, false, nil
}
