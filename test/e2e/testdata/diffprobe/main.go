// Command diffprobe prints, as one JSON object on stdout, what a program
// sees of the sandbox it runs in: descriptors, mounts, credentials,
// limits, id maps, what the seccomp filter answers, environment, names,
// cgroup, the /proc and /sys views, processes and its file systems. The
// differential test (executor_diff_test.go) runs it under both executors
// and compares the two reports field by field. It prints raw facts; the
// test normalises what differs per run (ids, inode numbers).
//
// Usage: diffprobe PROCPATH... (paths below /proc whose opening is
// reported, e.g. the masked ones)
//
// Nothing it does changes anything outside itself: the system calls of
// the table get invalid arguments (see syscalls.go).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// report is the probe's output; every field is compared.
type report struct {
	FDs          map[string]string
	Mountinfo    string
	Status       map[string]string
	Rlimits      map[string]string
	UIDMap       string
	GIDMap       string
	Setgroups    string
	Syscalls     map[string]string
	Sysinfo      map[string]string
	Env          []string
	Cwd          string
	Hostname     string
	Domainname   string
	Cgroup       string
	CgroupFiles  map[string]string
	Proc         map[string]string
	Meminfo      map[string]string
	CPUInfoCount int
	Sys          string
	Procs        []string
	OOMScoreAdj  string
	Statfs       map[string]string
}

func main() {
	// First, before the runtime opens anything of its own (the poller's
	// epoll and eventfd): the descriptors the program was given.
	r := report{FDs: fds()}
	r.Mountinfo = readFile("/proc/self/mountinfo")
	r.Status = status()
	r.Rlimits = rlimits()
	r.UIDMap = readFile("/proc/self/uid_map")
	r.GIDMap = readFile("/proc/self/gid_map")
	r.Setgroups = readFile("/proc/self/setgroups")
	r.Syscalls = syscalls()
	r.Sysinfo = sysinfo()
	r.Env = slices.Sorted(slices.Values(os.Environ()))
	r.Cwd, _ = os.Getwd()
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		r.Hostname, r.Domainname = unix.ByteSliceToString(u.Nodename[:]), unix.ByteSliceToString(u.Domainname[:])
	}
	r.Cgroup = readFile("/proc/self/cgroup")
	r.CgroupFiles = files(cgroupFiles)
	r.Proc = map[string]string{}
	for _, p := range procPaths(os.Args[1:]) {
		r.Proc[p] = fileOrDir(p)
	}
	r.Meminfo = meminfo()
	r.CPUInfoCount = cpuinfoCount()
	r.Sys = dir("/sys")
	r.Procs = procs()
	r.OOMScoreAdj = readFile("/proc/self/oom_score_adj")
	r.Statfs = statfs()
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// result renders an error as a value: "ok" or "errno=ENAME".
func result(err error) string {
	if err == nil {
		return "ok"
	}
	if e, ok := err.(unix.Errno); ok {
		if name := unix.ErrnoName(e); name != "" {
			return "errno=" + name
		}
		return "errno=" + strconv.Itoa(int(e))
	}
	if pe, ok := err.(*os.PathError); ok {
		return result(pe.Err)
	}
	return "error=" + err.Error()
}

// readFile is a file's contents (at most 64 KiB), or its error.
func readFile(p string) string {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return result(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 64<<10)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err != nil {
			return result(err)
		}
		if m == 0 {
			break
		}
		n += m
	}
	return string(buf[:n])
}

// files reads each path.
func files(paths []string) map[string]string {
	m := map[string]string{}
	for _, p := range paths {
		m[p] = readFile(p)
	}
	return m
}

// fileOrDir is a file's contents, or a directory's listing.
func fileOrDir(p string) string {
	if got := readFile(p); got != "errno=EISDIR" {
		return got
	}
	return "directory: " + dir(p)
}

// dir lists a directory's names, sorted, or its error.
func dir(p string) string {
	ents, err := os.ReadDir(p)
	if err != nil {
		return result(err)
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return strings.Join(names, " ")
}

// fds lists the open descriptors and what each points to, without the
// one listing them, with raw system calls only.
func fds() map[string]string {
	m := map[string]string{}
	dfd, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		m["error"] = result(err)
		return m
	}
	defer unix.Close(dfd)
	buf := make([]byte, 8192)
	var names []string
	for range 64 {
		n, err := unix.Getdents(dfd, buf)
		if err != nil {
			m["error"] = result(err)
			return m
		}
		if n == 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	link := make([]byte, 4096)
	for _, name := range names {
		if name == strconv.Itoa(dfd) {
			continue
		}
		n, err := unix.Readlinkat(dfd, name, link)
		if err != nil {
			m[name] = result(err)
			continue
		}
		m[name] = string(link[:n])
	}
	return m
}

// statusFields are the lines of /proc/self/status the report keeps.
var statusFields = []string{"Umask", "Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
	"NoNewPrivs", "Seccomp", "Seccomp_filters", "Cpus_allowed_list", "Mems_allowed_list", "SigIgn", "SigBlk", "SigCgt",
	"NSpid", "NStgid", "PPid", "Speculation_Store_Bypass"}

func status() map[string]string {
	return fields(readFile("/proc/self/status"), statusFields)
}

// fields picks the "Key:\tvalue" lines named in keys.
func fields(text string, keys []string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if ok && slices.Contains(keys, k) {
			m[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return m
}

// rlimitNames are every resource getrlimit knows, by number.
var rlimitNames = []string{"CPU", "FSIZE", "DATA", "STACK", "CORE", "RSS", "NPROC", "NOFILE", "MEMLOCK", "AS",
	"LOCKS", "SIGPENDING", "MSGQUEUE", "NICE", "RTPRIO", "RTTIME"}

func rlimits() map[string]string {
	m := map[string]string{}
	for i, name := range rlimitNames {
		var l unix.Rlimit
		if err := unix.Prlimit(0, i, nil, &l); err != nil {
			m[name] = result(err)
			continue
		}
		m[name] = fmt.Sprintf("%d %d", l.Cur, l.Max)
	}
	return m
}

// cgroupFiles are where the limits would show through a cgroup
// mount inside the sandbox, v1 and v2.
var cgroupFiles = []string{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
	"/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/pids.max"}

// procPaths are the /proc paths to report: those given and the view's.
func procPaths(args []string) []string {
	p := []string{"/proc/uptime", "/proc/loadavg", "/proc/diskstats", "/proc/swaps", "/proc/cmdline",
		"/proc/cgroups", "/proc/sys/kernel/random/boot_id", "/proc/sys/fs/file-nr"}
	for _, a := range args {
		p = append(p, "/proc/"+a)
	}
	return p
}

// cpuinfoCount counts the processors /proc/cpuinfo lists.
func cpuinfoCount() int {
	n := 0
	for _, l := range strings.Split(readFile("/proc/cpuinfo"), "\n") {
		if strings.HasPrefix(l, "processor") {
			n++
		}
	}
	return n
}

func meminfo() map[string]string {
	return fields(readFile("/proc/meminfo"), []string{"MemTotal", "SwapTotal", "SwapFree", "CommitLimit"})
}

// procs lists every process as "PID PPID COMM UID".
func procs() []string {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return []string{result(err)}
	}
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		st := fields(readFile("/proc/"+e.Name()+"/status"), []string{"Name", "PPid", "Uid"})
		out = append(out, strings.Join([]string{e.Name(), st["PPid"], st["Name"], st["Uid"]}, " "))
	}
	return out
}

// statfs reports the sandbox's own file systems: type, sizes, flags.
func statfs() map[string]string {
	m := map[string]string{}
	for _, p := range []string{"/", "/workspace", "/tmp", os.Getenv("HOME"), "/dev/shm", "/dev", "/proc"} {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil {
			m[p] = result(err)
			continue
		}
		m[p] = fmt.Sprintf("type=%#x bsize=%d blocks=%d files=%d namelen=%d flags=%#x",
			st.Type, st.Bsize, st.Blocks, st.Files, st.Namelen, st.Flags)
	}
	return m
}
