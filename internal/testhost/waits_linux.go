package testhost

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// NoBlockedWaits looks at pid's threads samples times, 10 ms apart, and
// fails t naming every thread it found asleep in a blocking wait
// (BlockedWaits). The caller makes pid wait first (a sandbox that
// sleeps); a correct pid never shows one, however slow the host.
func NoBlockedWaits(t testing.TB, pid, samples int) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	seen := map[string]bool{}
	for range samples {
		blocked, err := BlockedWaits(pid)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocked {
			seen[b] = true
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(seen) > 0 {
		t.Errorf("threads of %d asleep in a blocking wait, which costs the runtime a retaken P and a woken thread: %v", pid, seen)
	}
}

// blockingWaits are the system calls a Go process waits in when it waits
// for a child or a descriptor outside the network poller: a thread asleep
// in one of them keeps its P until the runtime's monitor takes it.
var blockingWaits = map[int]string{
	unix.SYS_READ:     "read",
	unix.SYS_RECVFROM: "recvfrom",
	unix.SYS_RECVMSG:  "recvmsg",
	unix.SYS_WAIT4:    "wait4",
	unix.SYS_WAITID:   "waitid",
}

// BlockedWaits lists pid's threads asleep in a blocking wait (read,
// recvfrom, recvmsg, wait4, waitid), one "tid syscall(fd)" each, but for
// the calling thread, whose reads of the others' /proc files may sleep
// (the caller locks its goroutine to it). Only a sleeping thread (state
// S or D) counts: a non-blocking read caught mid-call is running.
// Threads that end while listed are skipped.
func BlockedWaits(pid int) ([]string, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tids, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	var blocked []string
	self := strconv.Itoa(unix.Gettid())
	for _, tid := range tids {
		if tid.Name() == self {
			continue
		}
		if w, ok := blockedWait(filepath.Join(dir, tid.Name())); ok {
			blocked = append(blocked, tid.Name()+" "+w)
		}
	}
	return blocked, nil
}

// blockedWait is the blocking wait the thread of task dir sleeps in.
func blockedWait(task string) (string, bool) {
	stat, err := os.ReadFile(filepath.Join(task, "stat"))
	if err != nil {
		return "", false
	}
	// The state follows the command's closing parenthesis.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 || i+2 >= len(stat) || (stat[i+2] != 'S' && stat[i+2] != 'D') {
		return "", false
	}
	sc, err := os.ReadFile(filepath.Join(task, "syscall"))
	if err != nil {
		return "", false
	}
	f := strings.Fields(string(sc))
	if len(f) < 2 {
		return "", false // "running", or not in a system call
	}
	nr, err := strconv.Atoi(f[0])
	name, ok := blockingWaits[nr]
	if err != nil || !ok {
		return "", false
	}
	fd, _ := strconv.ParseInt(strings.TrimPrefix(f[1], "0x"), 16, 64)
	return fmt.Sprintf("%s(%d)", name, fd), true
}
