package nsinit

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// answerer answers the sandbox's sysinfo(2) calls, which the seccomp
// filter of native and Docker boxes (seccomp.InstallNotifying) sends to
// the init, with the box's own world (sysinfoFigures) instead of the
// host's. It runs on a thread of its own, locked and never given back,
// that:
//   - is in the sandbox's cgroup (on cgroup v1 it joins with the init's
//     main thread; elsewhere the whole init is born there), so a flood of
//     calls costs the sandbox's CPU quota, not the host's;
//   - has the sandbox user's file identity and no capability: it opens the
//     caller's /proc/PID/mem, which the kernel lets a thread whose fsuid
//     and fsgid are the caller's ids open (PTRACE_MODE_ATTACH_FSCREDS; no
//     CAP_SYS_PTRACE, which no init thread has, and no Yama exception:
//     the init is every caller's ancestor), and it reads hostile input;
//   - answers one call at a time, into buffers it owns, so a flood
//     allocates nothing and queues in the kernel, where each caller
//     waits, and the init's other threads go on.
//
// It lives as long as the init: were the listener closed, every later
// call would fail with ENOSYS.
type answerer struct {
	// listener gets the listener's descriptor once lockdown has it;
	// ready the outcome of the thread's preparation.
	listener chan int
	ready    chan error
	// start is the box's start on CLOCK_BOOTTIME; total its memory.
	start unix.Timespec
	total uint64
	// usage is the sandbox's memory.usage_in_bytes (cgroup v1), read
	// for what is free of total, or -1: free is then all of it, as the
	// view's /proc/meminfo says.
	usage    int
	usageBuf [24]byte
	// procfd is the sandbox's /proc, opened once the root is built.
	procfd int
	// procs is the last count of the box's processes, made at counted.
	procs   int
	counted time.Duration
	// answered is the answers given since windowStart (CLOCK_MONOTONIC),
	// for pace.
	answered    int
	windowStart time.Duration
	// Buffers of one answer: the path of the caller's mem file, the
	// listing of /proc, and the struct written to the caller.
	path    [32]byte
	dirents [8192]byte
	maps    [8192]byte
	info    [sysinfoSize]byte
}

// sysinfoAnswerer is the init's answerer, once started.
var sysinfoAnswerer *answerer

// bootClock is CLOCK_BOOTTIME when the init started: the box's uptime
// counts from it.
var bootClock unix.Timespec

// startAnswerer starts the answerer's thread unless it runs already;
// awaitAnswerer waits until it is ready, so that its start overlaps the
// rest of setup. tasks are cgroup v1 tasks descriptors the thread joins
// first and then closes (nil: the init is in the sandbox's cgroup
// already); usage is the cgroup's memory usage file, or -1; the answerer
// owns both. memoryBytes is the box's memory limit (0: the host's
// memory, which the sandbox may use whole).
func startAnswerer(tasks []int, usage int, memoryBytes int64) {
	if sysinfoAnswerer != nil {
		closeAll(append(tasks, usage))
		return
	}
	a := &answerer{listener: make(chan int, 1), ready: make(chan error, 1), start: bootClock, total: uint64(max(memoryBytes, 0)), procfd: -1, usage: usage}
	sysinfoAnswerer = a
	go func() {
		// Never unlocked: the thread keeps an identity and capabilities
		// of its own, and ends with the goroutine should it end.
		runtime.LockOSThread()
		err := a.prepare(tasks)
		closeAll(tasks)
		a.ready <- err
		if err == nil {
			a.serve(<-a.listener)
		}
	}()
}

// awaitAnswerer waits for the answerer startAnswerer started.
func awaitAnswerer() error {
	if err := <-sysinfoAnswerer.ready; err != nil {
		return fmt.Errorf("starting the sysinfo answerer: %w", err)
	}
	return nil
}

// prepare gives the calling thread what answering needs and nothing
// more: the sandbox's cgroup, the sandbox user's file identity, no
// supplementary group, no capability.
func (a *answerer) prepare(tasks []int) error {
	for i, fd := range tasks {
		if _, err := unix.Write(fd, []byte("0")); err != nil {
			return fmt.Errorf("joining the cgroup (file %d): %w", i, err)
		}
	}
	if a.total == 0 {
		var si unix.Sysinfo_t
		if err := unix.Sysinfo(&si); err != nil {
			return fmt.Errorf("reading the host's memory: %w", err)
		}
		a.total = si.Totalram * uint64(si.Unit)
	}
	// setgroups, raw: x/sys's (through the Go runtime) changes every
	// thread, and the init's main thread did so only for itself. Where
	// the user namespace denies it (rootless), the main thread kept its
	// groups too (setFileIdentity).
	if b, err := os.ReadFile("/proc/self/setgroups"); err == nil && string(b) == "allow\n" {
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
			return fmt.Errorf("dropping the supplementary groups: %w", e)
		}
	}
	// setfsgid(2) and setfsuid(2) report no errors: they return the previous id
	_ = unix.Setfsgid(userGID)
	_ = unix.Setfsuid(userUID) // reports no error either
	if gid, _ := unix.SetfsgidRetGid(-1); gid != userGID {
		return fmt.Errorf("setting the file group to %d: it is %d", userGID, gid)
	}
	if uid, _ := unix.SetfsuidRetUid(-1); uid != userUID {
		return fmt.Errorf("setting the file owner to %d: it is %d", userUID, uid)
	}
	return keepOnly(nil)
}

// openProc opens the sandbox's /proc for the answerer, once the root is
// built and before the filter is installed: a failure fails the start,
// rather than every call's answer.
func (a *answerer) openProc() error {
	if a.procfd >= 0 {
		return nil
	}
	fd, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening /proc for the sysinfo answerer: %w", err)
	}
	a.procfd = fd
	return nil
}

// serve answers calls on listener for the rest of the init's life, or
// until receiving fails maxRecvFailures times in a row for a reason it
// does not expect: it then closes the listener, so that every later call
// fails with ENOSYS rather than waiting for an answer that never comes.
func (a *answerer) serve(listener int) {
	notifSyncWakeUp(listener)
	failures := 0
	for failures < maxRecvFailures {
		var req seccompNotif
		if err := notifRecv(listener, &req); err != nil {
			// ENOENT: the caller went away before its call was read.
			if !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.ENOENT) {
				failures++
				time.Sleep(recvBackoff)
			}
			continue
		}
		failures = 0
		a.pace()
		errno, ok := a.answer(listener, &req)
		if !ok {
			continue
		}
		// ENOENT here too: the caller was killed, or (on kernels before
		// 5.19) its call interrupted by a signal, while the answer was made.
		_ = notifSend(listener, &seccompNotifResp{ID: req.ID, Error: errno})
	}
	if err := unix.Close(listener); err != nil {
		fmt.Fprintf(os.Stderr, "warden-init: closing the sysinfo listener: %v\n", err)
	}
}

// recvBackoff paces the answerer after a failure it does not expect,
// which could otherwise repeat at once forever; maxRecvFailures such
// failures in a row (a second of them) end its service.
const (
	recvBackoff     = 10 * time.Millisecond
	maxRecvFailures = 100
)

// maxAnswersPerSecond bounds the answers a box gets, far above what any
// real program needs (programs call sysinfo a few times, at start):
// callers beyond it simply wait. It bounds the CPU a flood costs, and
// with it the part the Go runtime's own threads spend outside the
// sandbox's cgroup on cgroup v1 (docs/sandbox.md).
const maxAnswersPerSecond = 2000

// pace waits, when the box has had maxAnswersPerSecond answers in the
// current second, until the next second begins.
func (a *answerer) pace() {
	var now unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &now) // a valid clock: cannot fail
	at := time.Duration(now.Nano())
	if at-a.windowStart >= time.Second {
		a.windowStart, a.answered = at, 0
	}
	if a.answered >= maxAnswersPerSecond {
		time.Sleep(a.windowStart + time.Second - at)
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &now) // a valid clock: cannot fail
		a.windowStart, a.answered = time.Duration(now.Nano()), 0
	}
	a.answered++
}

// answerFunc answers one call: 0 or the negative errno it fails with,
// and ok false when the call no longer waits, and nothing must be sent.
type answerFunc func(a *answerer, listener int, req *seccompNotif) (errno int32, ok bool)

// answers holds the answer to each syscall the filter sends the init,
// keyed by number: every one of seccomp.Notified must be here
// (TestAnswersCoverNotified).
var answers = map[int32]answerFunc{
	unix.SYS_SYSINFO: (*answerer).sysinfo,
}

// answer answers req from answers; a call of another ABI or number,
// which the filter never sends, fails with ENOSYS.
func (a *answerer) answer(listener int, req *seccompNotif) (errno int32, ok bool) {
	f, known := answers[req.Nr]
	if !known || req.Arch != unix.AUDIT_ARCH_X86_64 {
		return -int32(unix.ENOSYS), true
	}
	return f(a, listener, req)
}

// sysinfo writes the box's struct sysinfo at the caller's pointer.
func (a *answerer) sysinfo(listener int, req *seccompNotif) (errno int32, ok bool) {
	mem, err := a.openMem(req.Pid)
	if err != nil {
		// A caller gone between the notification and the open, or one
		// whose memory its user may not write (it made itself
		// non-dumpable).
		valid, err := notifIDValid(listener, req.ID)
		return -int32(unix.EPERM), valid || err != nil
	}
	defer unix.Close(mem)
	addr := req.Args[0]
	// The mem file writes through page protections (FOLL_FORCE); the
	// kernel's own call gives EFAULT for a read-only or PROT_NONE page.
	if addr > math.MaxInt64-sysinfoSize || !a.writable(req.Pid, addr, sysinfoSize) {
		valid, err := notifIDValid(listener, req.ID)
		return -int32(unix.EFAULT), valid || err != nil
	}
	switch valid, err := notifIDValid(listener, req.ID); {
	case err != nil:
		return -int32(unix.EPERM), true // nothing is written unchecked
	case !valid:
		return 0, false // the thread id may now name another process
	}
	encodeSysinfo(&a.info, a.figures())
	if n, err := unix.Pwrite(mem, a.info[:], int64(addr)); err != nil || n != len(a.info) {
		return -int32(unix.EFAULT), true
	}
	return 0, true
}

// maxMapsBytes bounds how much of a caller's /proc/TID/maps is read
// looking for its pointer: a pointer mapped beyond it (a process with
// tens of thousands of mappings) gets EFAULT.
const maxMapsBytes = 1 << 20

// writable says whether the n bytes at addr are mapped writable in the
// caller's thread tid, from its /proc/TID/maps: the mappings that hold
// them must follow one another without a gap, each writable.
func (a *answerer) writable(tid uint32, addr, n uint64) bool {
	p := strconv.AppendUint(a.path[:0], uint64(tid), 10)
	p = append(p, "/maps\x00"...)
	fd, err := openAt(a.procfd, p, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	covered, end, kept := addr, addr+n, 0
	for read := 0; read < maxMapsBytes; {
		got, err := unix.Read(fd, a.maps[kept:])
		if err != nil || got <= 0 {
			return false
		}
		read += got
		buf := a.maps[:kept+got]
		for i := bytes.IndexByte(buf, '\n'); i >= 0; i = bytes.IndexByte(buf, '\n') {
			lo, hi, w, ok := parseMapsLine(buf[:i])
			buf = buf[i+1:]
			switch {
			case !ok || lo > covered:
				return false // a gap before the struct's end
			case hi > covered && !w:
				return false
			case hi > covered:
				covered = hi
			}
			if covered >= end {
				return true
			}
		}
		if kept = copy(a.maps[:], buf); kept == len(a.maps) {
			return false // a line longer than the buffer
		}
	}
	return false
}

// openMem opens the mem file of the caller's thread, for writing.
func (a *answerer) openMem(tid uint32) (int, error) {
	if a.procfd < 0 {
		return -1, unix.ENOENT
	}
	p := strconv.AppendUint(a.path[:0], uint64(tid), 10)
	p = append(p, "/mem\x00"...)
	return openAt(a.procfd, p, unix.O_WRONLY|unix.O_CLOEXEC)
}

// figures are the box's world now.
func (a *answerer) figures() sysinfoFigures {
	var now unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &now) // a valid clock: cannot fail
	if at := time.Duration(now.Nano()); a.procs == 0 || at-a.counted >= procsEvery {
		a.procs, a.counted = a.countProcs(), at
	}
	return sysinfoFigures{
		UptimeSeconds: now.Sec - a.start.Sec,
		TotalRAM:      a.total,
		FreeRAM:       a.total - min(a.used(), a.total),
		Procs:         a.procs,
	}
}

// used is the sandbox's memory use in bytes (cgroup v1's usage, which
// counts its tmpfs files too), or 0 when it cannot be read.
func (a *answerer) used() uint64 {
	if a.usage < 0 {
		return 0
	}
	n, err := unix.Pread(a.usage, a.usageBuf[:], 0)
	if err != nil {
		return 0
	}
	return parseUsage(a.usageBuf[:n])
}

// openMemoryUsage opens the memory.usage_in_bytes beside whichever of
// the cgroup v1 tasks files is the memory controller's, or returns -1.
// It runs before the root is built, when the init's mount namespace
// still holds the host's cgroup mounts; the path comes from the host's
// descriptor, not from anything the sandbox wrote.
func openMemoryUsage(tasks []int) int {
	for _, fd := range tasks {
		link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		if err != nil || !strings.HasSuffix(link, "/tasks") {
			continue
		}
		p := strings.TrimSuffix(link, "tasks") + "memory.usage_in_bytes"
		if u, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0); err == nil {
			return u
		}
	}
	return -1
}

// procsEvery is how long a count of the box's processes serves: listing
// /proc was a third of the answerer's CPU in a flood of calls, and no
// program needs the count exact to the moment.
const procsEvery = 100 * time.Millisecond

// countProcs counts the processes of the box's PID namespace, the
// numbered entries of its /proc, at least the init.
func (a *answerer) countProcs() int {
	if a.procfd < 0 {
		return 1
	}
	if _, err := unix.Seek(a.procfd, 0, 0); err != nil {
		return 1
	}
	n := 0
	for {
		got, err := unix.Getdents(a.procfd, a.dirents[:])
		if err != nil || got <= 0 {
			return max(n, 1)
		}
		n += countPids(a.dirents[:got])
	}
}
