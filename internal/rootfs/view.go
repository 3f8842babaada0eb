package rootfs

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// View is the sandbox's own world as /proc and /sys show it to programs
// that size themselves by the machine (a worker pool, a JVM, a build
// tool): memory is the sandbox's limit and the CPUs are its quota, as
// LXCFS shows a container. The values are fixed when the sandbox starts;
// the files never change afterwards.
type View struct {
	// MemoryBytes is the memory limit shown as MemTotal; zero shows the
	// host's MemTotal (see Meminfo).
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// CPUs is how many CPUs the sandbox sees: its quota rounded up (see
	// ViewCPUs), 0 for all the init may use; the init clamps it to those.
	CPUs int `json:"cpus,omitempty"`
}

// ViewCPUs is how many CPUs a sandbox with a quota of cpus cores is
// shown: the quota rounded up, since 1.5 cores of time keep two workers
// busy; 0 for no quota, which shows every CPU the init may use. It is
// decided from the quota alone: the host process's own CPU affinity says
// nothing of the sandbox's, and the init clamps the figure to its own
// (ClampCPUs).
func ViewCPUs(cpus float64) int {
	if cpus <= 0 {
		return 0
	}
	return max(1, int(math.Ceil(cpus)))
}

// ClampCPUs is the CPU count a sandbox sees when it is to see want (0:
// all) and its init may use have: never more than have, at least one.
func ClampCPUs(want, have int) int {
	have = max(1, have)
	if want <= 0 || want > have {
		return have
	}
	return want
}

// ViewSource is what the ProcView files are made from when a sandbox
// starts: its View and what the host shows that is cut to it.
type ViewSource struct {
	View View
	// HostCPUInfo is the host's /proc/cpuinfo (its first View.CPUs
	// entries are shown, renumbered).
	HostCPUInfo []byte
	// HostMeminfo is the host's /proc/meminfo (its MemTotal is shown when
	// the sandbox has no memory limit).
	HostMeminfo []byte
	// HostCgroups is the host's /proc/cgroups (its controllers are shown,
	// each with one cgroup).
	HostCgroups []byte
	// BootID is a fresh random id; BootTime the Unix second the sandbox
	// started (its "btime").
	BootID   string
	BootTime int64
}

// ProcFile is one /proc file replaced by the sandbox's own: Name is its
// path under /proc, Content makes what the sandbox reads there.
type ProcFile struct {
	Name    string
	Content func(ViewSource) string
}

// fixed is a ProcFile content that is always s.
func fixed(s string) func(ViewSource) string { return func(ViewSource) string { return s } }

// nominalFileMax is the file-max the sandbox reads: the kernel sizes the
// host's by its memory, and this is what systemd sets on most hosts.
const nominalFileMax = "9223372036854775807"

// ProcView are the /proc files replaced by the sandbox's own, with why:
// each shows a host-wide figure or an identifier of the host otherwise.
// Files no program needs at all are in MaskedProcPaths instead.
var ProcView = []ProcFile{
	{"cmdline", fixed(viewCmdline)},                                                              // the host kernel's command line
	{"loadavg", fixed("0.00 0.00 0.00 1/1 1\n")},                                                 // host-wide load and task count
	{"uptime", fixed("0.00 0.00\n")},                                                             // the host's uptime
	{"diskstats", fixed("")},                                                                     // the host's disks and their traffic
	{"partitions", fixed("major minor  #blocks  name\n\n")},                                      // the host's disks
	{"swaps", fixed("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n")},                       // the host's swap devices by path
	{"meminfo", func(s ViewSource) string { return Meminfo(s.View.MemoryBytes, s.HostMeminfo) }}, // the host's memory, instead of the limit
	{"cpuinfo", func(s ViewSource) string { return CPUInfo(s.HostCPUInfo, s.View.CPUs) }},        // every host CPU, instead of the quota
	{"stat", func(s ViewSource) string { return Stat(s.View.CPUs, s.BootTime) }},                 // host CPU count and times, boot time, fork count
	{"softirqs", func(s ViewSource) string { return Softirqs(s.View.CPUs) }},                     // per-CPU host counters
	{"cgroups", func(s ViewSource) string { return Cgroups(s.HostCgroups) }},                     // cgroup counts that move with other tenants
	{"sys/kernel/random/boot_id", func(s ViewSource) string { return s.BootID + "\n" }},          // the same for every sandbox of one boot
	{"sys/fs/file-max", fixed(nominalFileMax + "\n")},                                            // sized by the host's memory
	{"sys/fs/file-nr", fixed("0\t0\t" + nominalFileMax + "\n")},                                  // host-wide open files
	{"sys/fs/inode-nr", fixed("0\t0\n")},                                                         // host-wide inode cache
	{"sys/fs/dentry-state", fixed("0\t0\t45\t0\t0\t0\n")},                                        // host-wide dentry cache
}

// viewCmdline is the kernel command line a sandbox reads.
const viewCmdline = "warden\n"

// ProcFiles are the contents of the ProcView files made from src, by name.
func ProcFiles(src ViewSource) map[string]string {
	files := make(map[string]string, len(ProcView))
	for _, f := range ProcView {
		files[f.Name] = f.Content(src)
	}
	return files
}

// Cgroups is the host's /proc/cgroups with every controller counting one
// cgroup, the sandbox's own: the host's counts move as other sandboxes
// start and stop. The header and the other columns are kept.
func Cgroups(host []byte) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(string(host), "\n") {
		f := strings.Fields(l)
		if len(f) == 4 && !strings.HasPrefix(l, "#") {
			fmt.Fprintf(&b, "%s\t%s\t1\t%s\n", f[0], f[1], f[3])
			continue
		}
		b.WriteString(l)
	}
	return b.String()
}

// Meminfo is a /proc/meminfo for a sandbox limited to limit bytes: all of
// it free (the file is written once, at start), no swap, since the
// sandbox has none. free(1) and programs sizing caches read these lines.
// Without a limit (0) the sandbox may use all of the host's memory, so
// MemTotal is the host's (hostMeminfo's), which sysinfo(2) shows anyway:
// a smaller nominal figure would have programs size themselves too small.
func Meminfo(limit int64, hostMeminfo []byte) string {
	if limit <= 0 {
		limit = hostMemTotal(hostMeminfo)
	}
	kb := limit / 1024
	var b strings.Builder
	for _, l := range []struct {
		name string
		kb   int64
	}{
		{"MemTotal", kb}, {"MemFree", kb}, {"MemAvailable", kb}, {"Buffers", 0},
		{"Cached", 0}, {"SwapCached", 0}, {"Active", 0}, {"Inactive", 0},
		{"SwapTotal", 0}, {"SwapFree", 0}, {"Dirty", 0}, {"Writeback", 0},
		{"AnonPages", 0}, {"Mapped", 0}, {"Shmem", 0}, {"Slab", 0},
		{"SReclaimable", 0}, {"SUnreclaim", 0}, {"CommitLimit", kb}, {"Committed_AS", 0},
	} {
		fmt.Fprintf(&b, "%-16s%8d kB\n", l.name+":", l.kb)
	}
	return b.String()
}

// hostMemTotal is the MemTotal of a /proc/meminfo in bytes, 0 if it has
// none.
func hostMemTotal(meminfo []byte) int64 {
	for _, l := range strings.Split(string(meminfo), "\n") {
		if rest, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || kb < 0 {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// CPUInfo is the host's /proc/cpuinfo cut to its first n entries (so the
// model and flags programs check stay true) and numbered 0 to n-1, as the
// sandbox's CPUs are; the entries' physical and core ids are the host's.
func CPUInfo(host []byte, n int) string {
	entries := bytes.SplitAfter(host, []byte("\n\n"))
	var b strings.Builder
	shown := 0
	for _, e := range entries {
		if shown == n || !bytes.HasPrefix(e, []byte("processor")) {
			continue
		}
		lines := strings.SplitAfter(string(e), "\n")
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, "processor"):
				fmt.Fprintf(&b, "processor\t: %d\n", shown)
			case strings.HasPrefix(l, "siblings"):
				fmt.Fprintf(&b, "siblings\t: %d\n", n)
			case strings.HasPrefix(l, "cpu cores"):
				fmt.Fprintf(&b, "cpu cores\t: %d\n", n)
			default:
				b.WriteString(l)
			}
		}
		shown++
	}
	return b.String()
}

// Stat is a /proc/stat of n idle CPUs with no history: glibc counts its
// "cpuN" lines for the online CPUs when /sys is absent, and ps reads the
// boot time from it.
func Stat(n int, bootTime int64) string {
	var b strings.Builder
	b.WriteString("cpu  0 0 0 0 0 0 0 0 0 0\n")
	for i := range n {
		fmt.Fprintf(&b, "cpu%d 0 0 0 0 0 0 0 0 0 0\n", i)
	}
	fmt.Fprintf(&b, "intr 0\nctxt 0\nbtime %d\nprocesses 1\nprocs_running 1\nprocs_blocked 0\nsoftirq 0 0 0 0 0 0 0 0 0 0 0\n", bootTime)
	return b.String()
}

// softirqNames are the rows of /proc/softirqs.
var softirqNames = []string{"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"}

// Softirqs is a /proc/softirqs of n CPUs with no counts.
func Softirqs(n int) string {
	var b strings.Builder
	b.WriteString("         ")
	for i := range n {
		fmt.Fprintf(&b, " %10s", fmt.Sprintf("CPU%d", i))
	}
	b.WriteString("\n")
	for _, name := range softirqNames {
		fmt.Fprintf(&b, "%9s", name+":")
		for range n {
			fmt.Fprintf(&b, " %10d", 0)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// CPURange is the "0-N" list the kernel writes in
// /sys/devices/system/cpu/online for n CPUs.
func CPURange(n int) string {
	if n <= 1 {
		return "0\n"
	}
	return fmt.Sprintf("0-%d\n", n-1)
}
