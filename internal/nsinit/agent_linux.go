package nsinit

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/streamrelay"
	"github.com/warden-sandbox/warden/internal/strictjson"
)

// agent is a session's init after setup: PID 1 of the sandbox, starting a
// process for each spawn request and reporting each one's end. Processes
// are forked only from the locked, locked-down main thread, so each one
// inherits its seccomp filter and empty capability sets; the agent's other
// threads keep the capabilities it needs to signal and reap.
type agent struct {
	// read reads the next request and the descriptors that come with it
	// (readRequest on the bare connection, streamRequests.read over the
	// stream).
	read func() (Request, []int, error)
	// ended is told of each spawn's end, reported or refused, once its
	// exited event is sent (streamRequests.ended over the stream, which
	// cuts the spawn's relays); nil on the bare connection.
	ended func(id uint64)

	sendMu sync.Mutex
	enc    *json.Encoder

	// mu orders registration after a fork against the reaper's lookup, so
	// a process that ends at once is never mistaken for an orphan.
	mu      sync.Mutex
	running map[int]uint64
	pgids   map[uint64]int
	// sweep lists the processes started without an exec cgroup, whose
	// end sweeps the orphans (sweepOrphans).
	sweep map[uint64]bool
	// started gets a token after each fork, waking a reaper that found no
	// child to wait for.
	started chan struct{}
	// sees names the root the sandbox runs on, for "not found" errors
	// (seenRoot).
	sees string
}

// spawnJob is a request handed to the main thread with its descriptors.
type spawnJob struct {
	req Request
	fds []int
}

// serve reports readiness and runs the agent until the host goes; it never
// returns normally, because the host ends a session by killing the init.
func serveSession(cfg *Config, ctl *os.File) int {
	a := &agent{running: map[int]uint64{}, pgids: map[uint64]int{}, sweep: map[uint64]bool{}, started: make(chan struct{}, 1), sees: seenRoot(cfg)}
	var events io.Writer = ctl
	a.read = func() (Request, []int, error) { return readRequest(ControlFD) }
	if cfg.Stream {
		conn, err := streamrelay.FileCopy(ctl, "control stream")
		var sr *streamRequests
		if err == nil {
			sr, err = serveStream(conn, streamEgress)
		}
		if err != nil {
			// the host cannot be told: the stream is what would carry it
			fmt.Fprintf(os.Stderr, "warden-init: %v\n", err)
			return exitNoHost
		}
		events, a.read, a.ended = sr.events, sr.read, sr.ended
	}
	a.enc = json.NewEncoder(events)
	if err := lockdown(cfg); err != nil {
		// the host reads this; it fails only once the host hung up, and then nobody is left to tell
		_ = a.send(Event{Kind: EventFailed, Status: &Status{Error: lockdownError{err}.Error()}})
		return 0
	}
	if err := a.send(Event{Kind: EventReady}); err != nil {
		return exitNoHost
	}
	jobs := make(chan spawnJob)
	go a.reap()
	go a.readRequests(jobs)
	for job := range jobs {
		a.spawn(job)
	}
	return exitNoHost
}

// sendExited reports spawn id's end and then tells ended of it.
func (a *agent) sendExited(id uint64, st Status) {
	a.sendEnded(exitedEvent(id, st))
}

// sendEnded sends an exited event and then tells ended of it; a send
// fails only once the host hung up, which ends the agent.
func (a *agent) sendEnded(e Event) {
	_ = a.send(e) // fails only once the host hung up (see above)
	if a.ended != nil {
		a.ended(e.ID)
	}
}

func (a *agent) send(e Event) error {
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	return a.enc.Encode(e)
}

// readRequests passes spawns to the main thread and carries out kills;
// it closes jobs when the host hangs up, which ends the agent.
func (a *agent) readRequests(jobs chan<- spawnJob) {
	defer close(jobs)
	for {
		req, fds, err := a.read()
		var refused *refusedSpawn
		if errors.As(err, &refused) {
			a.sendExited(req.ID, Status{ExitCode: 126, StartFailed: true, Error: refused.Error()})
			continue
		}
		if err != nil {
			return
		}
		switch req.Op {
		case OpSpawn:
			jobs <- spawnJob{req, fds}
		case OpKill:
			closeAll(fds)
			a.kill(req.ID, req.Signal)
		default:
			closeAll(fds)
		}
	}
}

// kill signals the process group the spawn created (the process is its
// leader, by setsid). Descendants that left the group are the host's to
// find, through the exec's cgroup.
func (a *agent) kill(id uint64, sig int) {
	a.mu.Lock()
	pgid, ok := a.pgids[id]
	a.mu.Unlock()
	if ok && sig > 0 {
		// ESRCH only: the group has ended, with nothing left to signal
		_ = unix.Kill(-pgid, unix.Signal(sig))
	}
}

// spawn runs on the locked main thread. With a v1 exec cgroup, the thread
// joins it, forks (the child is born inside) and returns to the session's
// cgroup, whose tasks descriptor the host sends as the last one. It
// returns before the process's start or end is reported: the host kills
// the exec's cgroup only after one of them, so never this thread.
func (a *agent) spawn(job spawnJob) {
	req := job.req
	if err := spawnShape(req, len(job.fds)); err != nil {
		closeAll(job.fds)
		a.sendExited(req.ID, Status{ExitCode: 126, StartFailed: true, Error: err.Error()})
		return
	}
	files, tasks := job.fds[:req.Files], job.fds[req.Files:]
	// Before the exec's cgroup and scheduling: the wait's polling is the
	// agent's, not charged to the exec's cpu.stat, cpu.max or pids.
	awaitReaper()
	if err := restoreSched(); err != nil {
		closeAll(job.fds)
		a.sendExited(req.ID, Status{ExitCode: 126, StartFailed: true, Error: err.Error()})
		return
	}
	if err := enterCgroup(tasks); err != nil {
		closeAll(job.fds)
		a.sendExited(req.ID, Status{ExitCode: 126, StartFailed: true, Error: err.Error()})
		return
	}
	a.mu.Lock()
	// Read before the fork: a kill of this process must come after it.
	ooms := boxOOMKills()
	restore := raiseOOMScore()
	pid, st := startProcess(req, files, a.sees)
	restore()
	// Leave before a.mu lets the reaper look the process up: once the
	// host has its end it kills everything in the exec's cgroup, and
	// this thread must be out of it by then or the host kills the agent.
	lerr := leaveCgroup(tasks)
	// Closed before any event of this exec is sent: the host may send
	// the next request as soon as it has one, and under a low
	// --open-files the agent needs these slots to receive its
	// descriptors.
	closeAll(tasks)
	if st == nil {
		a.running[pid] = req.ID
		a.pgids[req.ID] = pid
		a.sweep[req.ID] = req.Cgroup == 0
	}
	a.mu.Unlock()
	if lerr != nil && st == nil {
		// ESRCH only: the group has ended already
		_ = unix.Kill(-pid, unix.SIGKILL)
	}
	if st != nil {
		a.sendExited(req.ID, *st)
		return
	}
	select {
	case a.started <- struct{}{}:
	default:
	}
	// a send fails only once the host hung up, which ends the agent
	_ = a.send(Event{Kind: EventStarted, ID: req.ID, Pid: pid, OOMKills: ooms})
}

// spawnShape checks a spawn request against the descriptors that came
// with it. Fewer than it names means the kernel could not give the agent
// the rest: its table was full at the session's open-files limit.
func spawnShape(req Request, got int) error {
	want := req.Files + req.Cgroup
	switch {
	case got < want && req.Files >= 3:
		return fmt.Errorf("the agent received %d of the exec's %d descriptors: the session's open-files limit leaves it too few; raise --open-files or run fewer processes at once", got, want)
	case got != want || req.Files < 3 || req.Cgroup%2 != 0 || len(req.Argv) == 0 || len(req.Streams) != 0:
		return errors.New("malformed spawn request")
	}
	return nil
}

// enterCgroup moves this thread into the exec's cgroup: the first half of
// the descriptors are its tasks files, one per hierarchy, and the second
// half the session's own, to return to.
func enterCgroup(tasks []int) error {
	return writeTasks(tasks[:len(tasks)/2])
}

func leaveCgroup(tasks []int) error {
	return writeTasks(tasks[len(tasks)/2:])
}

func writeTasks(fds []int) error {
	for i, fd := range fds {
		if _, err := unix.Write(fd, []byte("0")); err != nil {
			return fmt.Errorf("joining the exec's cgroup (file %d): %w", i, err)
		}
	}
	return nil
}

func exitedEvent(id uint64, st Status) Event {
	return Event{Kind: EventExited, ID: id, Status: &st}
}

// reap waits for every child: the processes the agent started, whose ends
// it reports, and the orphans the PID namespace hands to its init.
func (a *agent) reap() {
	for {
		pid, err := waitExited()
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.ECHILD) {
			// Every child descends from a spawn, so none can appear
			// before the next one.
			<-a.started
			continue
		}
		if err != nil {
			return
		}
		a.mu.Lock()
		id, ok := a.running[pid]
		sweep := a.sweep[id]
		delete(a.running, pid)
		delete(a.pgids, id)
		delete(a.sweep, id)
		a.mu.Unlock()
		if ok {
			// What the process left in its group ends with it; the
			// unreaped leader keeps the group's id from being reused.
			_ = unix.Kill(-pid, unix.SIGKILL)
		}
		if ok && sweep {
			sweepOrphans(a.isRunning)
		}
		var ws unix.WaitStatus
		var ru unix.Rusage
		if _, err := wait4(pid, &ws, &ru); err != nil || !ok {
			continue
		}
		e := exitedEvent(id, statusOf(ws))
		e.CPUTimeUS = ru.Utime.Nano()/1000 + ru.Stime.Nano()/1000
		e.MaxRSSKiB = ru.Maxrss
		// After the reap: the kernel counts an OOM kill before it sends
		// the SIGKILL.
		e.OOMKills = boxOOMKills()
		a.sendEnded(e)
	}
}

// reaperCatchUp bounds how long a spawn waits for the reaper to reap
// the children that have ended: they are dead, so past it the spawn goes
// on rather than hold the session for a reaper that cannot keep up.
const reaperCatchUp = 2 * time.Second

// awaitReaper holds a spawn until the reaper has reaped every child of
// the agent that has ended (bounded by reaperCatchUp). The processes an
// exec left, killed when it ends or times out, reach the agent as orphans
// and stay zombies, listed in /proc and counted against the pids limit,
// until the reaper gets to them; on a loaded host that can be after the
// host has answered the exec and sent the next one. Waiting here, the
// next exec does not see the last one's processes unless the wait gives
// up, which it logs (rate-limited).
func awaitReaper() {
	deadline := time.Now().Add(reaperCatchUp)
	for endedChild() {
		if !time.Now().Before(deadline) {
			logGiveUp("the wait for the reaper", "an ended child still unreaped")
			return
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// isRunning says pid is a process the agent started and has not reaped.
func (a *agent) isRunning(pid int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.running[pid]
	return ok
}

func wait4(pid int, ws *unix.WaitStatus, ru *unix.Rusage) (int, error) {
	for {
		got, err := unix.Wait4(pid, ws, 0, ru)
		if !errors.Is(err, unix.EINTR) {
			return got, err
		}
	}
}

func statusOf(ws unix.WaitStatus) Status {
	if ws.Signaled() {
		return Status{ExitCode: 128 + int(ws.Signal()), Signal: int(ws.Signal())}
	}
	return Status{ExitCode: ws.ExitStatus()}
}

// readRequest reads one frame and the descriptors attached to its start.
func readRequest(fd int) (Request, []int, error) {
	var req Request
	head := make([]byte, 4)
	oob := make([]byte, unix.CmsgSpace(MaxRequestFDs*4))
	n, oobn, _, _, err := RecvmsgRetry(fd, head, oob)
	if err != nil {
		return req, nil, err
	}
	fds, err := parseRights(oob[:oobn])
	if err != nil {
		return req, nil, err
	}
	if n == 0 {
		closeAll(fds)
		return req, nil, io.EOF
	}
	if err := readFull(fd, head[n:]); err != nil {
		closeAll(fds)
		return req, nil, err
	}
	size := binary.BigEndian.Uint32(head)
	if size > maxConfig {
		closeAll(fds)
		return req, nil, fmt.Errorf("request of %d bytes is larger than %d", size, maxConfig)
	}
	body := make([]byte, size)
	if err := readFull(fd, body); err != nil {
		closeAll(fds)
		return req, nil, err
	}
	if err := strictjson.Decode(body, &req); err != nil {
		closeAll(fds)
		return req, nil, err
	}
	return req, fds, nil
}

// RecvmsgRetry is recvmsg(2) with MSG_CMSG_CLOEXEC, retried on EINTR: the
// one receive of messages with descriptors, for the agent, the init and
// the spawner's client.
func RecvmsgRetry(fd int, p, oob []byte) (int, int, int, unix.Sockaddr, error) {
	for {
		n, oobn, flags, from, err := unix.Recvmsg(fd, p, oob, unix.MSG_CMSG_CLOEXEC)
		if !errors.Is(err, unix.EINTR) {
			return n, oobn, flags, from, err
		}
	}
}

func readFull(fd int, p []byte) error {
	for len(p) > 0 {
		n, err := unix.Read(fd, p)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		p = p[n:]
	}
	return nil
}

func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for i := range msgs {
		rights, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			closeAll(fds)
			return nil, err
		}
		fds = append(fds, rights...)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// oomScore is the agent's /proc/self/oom_score_adj, opened before the
// thread's file identity changes (the file belongs to the init's own
// uid), or -1 outside a session.
var oomScore = -1

// openOOMScore opens oom_score_adj for a session's agent; see
// raiseOOMScore.
func openOOMScore(cfg *Config) error {
	if !cfg.Session {
		return nil
	}
	fd, err := unix.Open("/proc/self/oom_score_adj", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	oomScore = fd
	return nil
}

// raiseOOMScore makes the next process forked start with the highest OOM
// score, and returns how to put the agent's back: when a session reaches
// its memory limit the kernel then kills the code, never the agent that
// keeps the session. Raising needs no privilege, unlike sparing the agent
// with a negative score (CAP_SYS_RESOURCE, which containers often lack
// and whose floor children would inherit). The agent holds the high score
// only for the fork.
func raiseOOMScore() (restore func()) {
	if oomScore < 0 {
		return func() {}
	}
	old := make([]byte, 8)
	n, err := unix.Pread(oomScore, old, 0)
	if err != nil || n == 0 {
		return func() {}
	}
	if _, err := unix.Pwrite(oomScore, []byte("1000"), 0); err != nil {
		return func() {}
	}
	// a score not restored only leaves the agent first for the OOM killer; nobody in the box could act on it
	return func() { _, _ = unix.Pwrite(oomScore, old[:n], 0) }
}
