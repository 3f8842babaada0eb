package nsinit

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// sweepFor bounds sweepOrphans: each pass after the first finds only what
// a killed process forked or left as it died, or one still dying, which
// on a loaded host can take longer than fifty 1 ms pauses (the old bound,
// which then reported the exec's end with its orphans still alive). It is
// the host's wait for a killed exec cgroup to empty (cgroup.rmdirRetry),
// which the sweep stands in for where there is no exec cgroup.
const sweepFor = time.Second

// sweepOrphans kills what an exec left behind where no exec cgroup finds
// it (a boxed init, cgroup v2): every process the PID namespace handed to
// the agent (its parent is the agent: PID 1, or in a Pod the agent as
// the child subreaper, podSteps) that the agent did not start, with its
// process group and every process descending from it. A process that
// left its exec's group by setsid and was orphaned is caught here once an
// exec ends, and so is what it started, in its own session or not; one
// whose parent still lives belongs to that parent's exec and ends with
// it. It repeats until a pass finds no live orphan (for at most
// sweepFor, then it logs how many it last signalled and goes on), since a killed process's children reach the agent only once
// it has died, and a process may fork between a pass's look and its kill.
func sweepOrphans(mine func(pid int) bool) {
	deadline := time.Now().Add(sweepFor)
	for {
		n := killOrphans(mine)
		if n == 0 {
			return
		}
		if !time.Now().Before(deadline) {
			logGiveUp("the orphan sweep", strconv.Itoa(n)+" orphans still alive")
			return
		}
		time.Sleep(time.Millisecond) // let the killed run their exits
	}
}

// killOrphans is one pass of sweepOrphans: it returns how many live
// (not zombie) processes it signalled.
func killOrphans(mine func(pid int) bool) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	children := map[int][]int{}
	var orphans []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		ppid, zombie, ok := statOf(pid)
		if !ok || zombie {
			continue
		}
		children[ppid] = append(children[ppid], pid)
		if ppid == self && !mine(pid) {
			orphans = append(orphans, pid)
		}
	}
	killed := 0
	for len(orphans) > 0 {
		pid := orphans[len(orphans)-1]
		orphans = append(orphans[:len(orphans)-1], children[pid]...)
		delete(children, pid) // a pid reused mid-walk cannot loop it
		_ = unix.Kill(-pid, unix.SIGKILL)
		_ = unix.Kill(pid, unix.SIGKILL) // ESRCH only: gone already
		killed++
	}
	return killed
}

// statOf reads a process's parent and whether it is a zombie from
// /proc/PID/stat, whose second field (the command) may hold spaces and
// parentheses: the fields after its last ')' are fixed.
func statOf(pid int) (ppid int, zombie, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false, false
	}
	ppid, err = strconv.Atoi(string(f[1]))
	return ppid, string(f[0]) == "Z", err == nil
}
