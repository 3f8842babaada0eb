package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat, the same on
// every Linux.
const userHZ = 100

// statFields are the fields of /proc/<pid>/stat after the command name
// (the first is the state, field 3).
func statFields(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("%s: no command name", path)
	}
	return strings.Fields(s[i+1:]), nil
}

// ticks is the sum of fields (numbered as in proc(5)) in seconds.
func ticks(f []string, fields ...int) float64 {
	var t float64
	for _, n := range fields {
		if n-3 < len(f) {
			v, _ := strconv.ParseFloat(f[n-3], 64)
			t += v
		}
	}
	return t / userHZ
}

// Fields of /proc/<pid>/stat (proc(5)).
const (
	fieldPPID   = 4
	fieldUTime  = 14
	fieldSTime  = 15
	fieldCUTime = 16
	fieldCSTime = 17
)

// exitCPU waits for cmd's process to exit without reaping it, and reads
// its own CPU time (every thread's, user and system) and that of the
// children it reaped, in seconds: a zombie keeps both until reaped.
func exitCPU(cmd *exec.Cmd) (self, children float64, err error) {
	var info unix.Siginfo
	for {
		err = unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("waiting for pid %d: %w", cmd.Process.Pid, err)
	}
	f, err := statFields(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	return ticks(f, fieldUTime, fieldSTime), ticks(f, fieldCUTime, fieldCSTime), nil
}

// cpuCgroup is the cpu controller's cgroup of a task (the unified one on
// cgroup v2), from its /proc cgroup file.
func cpuCgroup(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	unified := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) < 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "cpu" {
				return f[2]
			}
		}
		if f[0] == "0" {
			unified = f[2]
		}
	}
	return unified
}

// hostCPU is the CPU time, in seconds, of the server and every process
// under it that runs outside a sandbox's cgroup: a whole process when all
// its threads are in the server's cgroup (the server, its spawner),
// else only those threads that are (an init's Go threads beside the one
// in its box). Keys name the process or thread, so two snapshots give
// the time spent between them.
func hostCPU(root int) map[string]float64 {
	own := cpuCgroup(fmt.Sprintf("/proc/%d/cgroup", root))
	out := map[string]float64{}
	for _, pid := range descendants(root) {
		dir := fmt.Sprintf("/proc/%d", pid)
		tasks, _ := filepath.Glob(dir + "/task/*")
		whole := true
		for _, t := range tasks {
			if cpuCgroup(t+"/cgroup") != own {
				whole = false
			}
		}
		if whole {
			if f, err := statFields(dir + "/stat"); err == nil {
				out[dir] = ticks(f, fieldUTime, fieldSTime)
			}
			continue
		}
		for _, t := range tasks {
			if cpuCgroup(t+"/cgroup") != own {
				continue
			}
			if f, err := statFields(t + "/stat"); err == nil {
				out[t] = ticks(f, fieldUTime, fieldSTime)
			}
		}
	}
	return out
}

// reapedCPU is, for root and each process under it whose threads all
// share root's cpu cgroup (the server and its spawner), the CPU time of
// the children it has reaped: an init's whole life, in its sandbox's
// cgroup and out of it, lands there once the spawner reaps it.
func reapedCPU(root int) map[string]float64 {
	own := cpuCgroup(fmt.Sprintf("/proc/%d/cgroup", root))
	out := map[string]float64{}
	for _, pid := range descendants(root) {
		dir := fmt.Sprintf("/proc/%d", pid)
		tasks, _ := filepath.Glob(dir + "/task/*")
		whole := len(tasks) > 0
		for _, t := range tasks {
			whole = whole && cpuCgroup(t+"/cgroup") == own
		}
		if f, err := statFields(dir + "/stat"); whole && err == nil {
			out[dir] = ticks(f, fieldCUTime, fieldCSTime)
		}
	}
	return out
}

// descendants are root and every process under it.
func descendants(root int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, err := statFields("/proc/" + e.Name() + "/stat"); err == nil && len(f) > fieldPPID-3 {
			ppid, _ := strconv.Atoi(f[fieldPPID-3])
			children[ppid] = append(children[ppid], pid)
		}
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// openFiles is the soft limit on open files of a process (0: ours).
func openFiles(pid int) (uint64, error) {
	if pid == 0 {
		var r unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
			return 0, err
		}
		return r.Cur, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Max open files") {
			f := strings.Fields(strings.TrimPrefix(line, "Max open files"))
			if len(f) > 0 {
				return strconv.ParseUint(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no open-files limit in /proc/%d/limits", pid)
}
