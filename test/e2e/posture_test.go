package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// postureScript prints, section by section, what a program learns of its
// machine: the /proc files that name the host or count host-wide, its
// ids, hostname, and what sizing tools read.
const postureScript = `sysinfo_py='` + sysinfoPy + `'
for f in /proc/cmdline /proc/loadavg /proc/uptime /proc/diskstats /proc/partitions /proc/swaps \
	/proc/meminfo /proc/cpuinfo /proc/stat /proc/softirqs /proc/sys/kernel/random/boot_id /etc/hostname; do
	echo "== $f"; cat "$f" 2>&1
done
echo "== mountinfo"; cat /proc/self/mountinfo
echo "== counters"; cat /proc/vmstat /proc/schedstat /proc/locks /proc/pressure/* /proc/sys/kernel/threads-max \
	/proc/sys/vm/min_free_kbytes 2>/dev/null | wc -c
echo "== cgroups"; awk 'NR > 1 {print $3}' /proc/cgroups | sort -u
echo "== fs"; cat /proc/sys/fs/file-nr /proc/sys/fs/inode-nr /proc/sys/fs/dentry-state /proc/sys/fs/file-max
echo "== sysinfo"; python3 -c "$sysinfo_py"
echo "== phys_pages"; python3 -c 'import os; print(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))'
echo "== sched"; awk '/^se.exec_start/ {print $3 / 1000}' /proc/self/sched
echo "== uid_map"; awk '{print $1, $2, $3}' /proc/self/uid_map
echo "== hostname"; hostname
echo "== nproc"; nproc
echo "== cpu_count"; python3 -c 'import os; print(os.cpu_count())'
echo "== widened"; python3 -c 'import os; os.sched_setaffinity(0, range(1024)); print(len(os.sched_getaffinity(0)))'
echo "== free"; free -m | awk '/^Mem:/ {print $2}'
echo "== clocks"; python3 -c 'import time; print(time.clock_gettime(time.CLOCK_BOOTTIME), time.monotonic())'
echo "== start"; awk -v hz="$(getconf CLK_TCK)" '{print $22 / hz}' /proc/self/stat
echo "== timens"; awk '{print $2, $3}' /proc/self/timens_offsets
echo "== irq_fs"; python3 -c 'import os; print(sum(len(os.listdir(d)) for d in ("/proc/irq", "/proc/fs")))'
echo "== cpus_allowed"; awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status
`

// sysinfoPy prints what sysinfo(2) answers: its return value and errno,
// then total and free RAM in bytes, total swap, the three loads summed,
// the uptime in seconds and the process count, and last the errno of a
// call with a pointer to nowhere (EFAULT, 14). It holds no single quote,
// for postureScript's.
const sysinfoPy = sysinfoStructPy + `
s = S()
libc = c.CDLL(None, use_errno=True)
r = libc.sysinfo(c.byref(s))
print(r, c.get_errno(), s.total * s.unit, s.free * s.unit, s.tswap * s.unit, sum(s.loads), s.up, s.procs, end=" ")
libc.sysinfo(c.c_void_p(8))
print(c.get_errno())`

// sysinfoStructPy defines struct sysinfo (x86_64) for ctypes as S, and
// imports ctypes as c, for the probes that call sysinfo(2).
const sysinfoStructPy = `import ctypes as c
L = c.c_ulong
class S(c.Structure):
    _fields_ = [("up", c.c_long), ("loads", L * 3), ("total", L), ("free", L), ("shared", L), ("buf", L),
                ("tswap", L), ("fswap", L), ("procs", c.c_ushort), ("th", L), ("fh", L), ("unit", c.c_uint), ("pad", c.c_char * 8)]`

// postureSections splits the probe's output into its sections.
func postureSections(out string) map[string]string {
	sec := map[string]string{}
	name := ""
	for _, l := range strings.SplitAfter(out, "\n") {
		if n, ok := strings.CutPrefix(l, "== "); ok {
			name = strings.TrimSpace(n)
			continue
		}
		sec[name] += l
	}
	return sec
}

// hostFile is a host file's contents, trimmed; the test fails without it.
func hostFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("reading the host's %s: %v", p, err)
	}
	return strings.TrimSpace(string(b))
}

// postureCheck is one thing a sandbox on backends must not show of the
// host, or must show of itself.
type postureCheck struct {
	name     string
	backends []string
	check    func(sec map[string]string, whole string) (got string, ok bool)
}

// postureChecks are TestPosture's assertions. The docker box's mounts
// and cgroup path are the docker backend's to hide (TestBackendPosture);
// its /proc shows the same view as native's where runc lets a file be
// bound over, and is masked where it does not.
func postureChecks(t *testing.T) []postureCheck {
	bootID := hostFile(t, "/proc/sys/kernel/random/boot_id")
	cmdline := hostFile(t, "/proc/cmdline")
	memTotal := strings.Fields(hostFile(t, "/proc/meminfo"))[1]
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	absent := func(host string) func(map[string]string, string) (string, bool) {
		return func(_ map[string]string, whole string) (string, bool) {
			if host == "" {
				return "", true
			}
			return "the output contains " + host, !strings.Contains(whole, host)
		}
	}
	section := func(name, want string) func(map[string]string, string) (string, bool) {
		return func(sec map[string]string, _ string) (string, bool) {
			got := strings.TrimSpace(sec[name])
			return got, got == want
		}
	}
	native := []string{"native"}
	both := []string{"native", "docker"}
	// microvm's guest kernel is its own: its boot_id, command line,
	// memory and CPUs are the VM's, never the host's.
	vm := []string{"native", "docker", "microvm"}
	docker := []string{"docker"}
	return []postureCheck{
		{"the host's boot_id", vm, absent(bootID)},
		{"the host's kernel command line", vm, absent(cmdline)},
		{"the kernel command line masked", docker, section("/proc/cmdline", "")},
		{"the host's MemTotal", vm, absent("MemTotal:       " + memTotal)},
		{"the host's uptime in /proc/uptime", both, section("/proc/uptime", "0.00 0.00")},
		{"the host's disks in /proc/diskstats", both, section("/proc/diskstats", "")},
		{"the host's devtmpfs size (its memory)", native, absent(devtmpfsSize(t))},
		{"the host paths of Warden's state (/etc template, devices)", native, absent("/run/warden")},
		{"host-wide counters (vmstat, schedstat, locks, pressure, threads-max, min_free_kbytes)", both, section("counters", "0")},
		{"other tenants' cgroups in /proc/cgroups", native, section("cgroups", "1")},
		{"/proc/cgroups masked", docker, section("cgroups", "")},
		{"host-wide file and cache counts in /proc/sys/fs", native, section("fs", "0\t0\t9223372036854775807\n0\t0\n0\t0\t45\t0\t0\t0\n9223372036854775807")},
		{"/proc/sys/fs's counts masked", docker, section("fs", "")},
		{"sysinfo(2) of the sandbox's own world (--memory 256m)", []string{"native", "docker"}, ownSysinfo(hostUptime(t))},
		{"glibc's _SC_PHYS_PAGES at --memory 256m", []string{"native", "docker"}, section("phys_pages", "268435456")},
		// KNOWN-VISIBLE (documented): /proc/PID/sched counts from the host's boot.
		{"the host's uptime in /proc/self/sched", both, atLeast("sched", hostSchedClock(t)/2)},
		// KNOWN-VISIBLE (documented): uid_map names the sandbox user's host uid.
		{"one uid mapped, the sandbox user's, to a host uid", native, func(sec map[string]string, _ string) (string, bool) {
			got := strings.TrimSpace(sec["uid_map"])
			f := strings.Fields(got)
			return got, len(f) == 3 && f[0] == "1000" && f[2] == "1"
		}},
		{"the host's task count in loadavg", both, section("/proc/loadavg", "0.00 0.00 0.00 1/1 1")},
		{"the host's hostname", vm, func(sec map[string]string, _ string) (string, bool) {
			got := strings.TrimSpace(sec["hostname"])
			return got, got != host && got == "sandbox"
		}},
		{"nproc at --cpus 1", vm, section("nproc", "1")},
		{"os.cpu_count() at --cpus 1", vm, section("cpu_count", "1")},
		// The docker box's cpuset holds its CPUs; KNOWN-VISIBLE
		// (documented): a native program may widen its affinity.
		{"the CPUs a widened affinity gets at --cpus 1", docker, section("widened", "1")},
		{"the host's CPUs to a widened affinity", native, section("widened", strconv.Itoa(runtime.NumCPU()))},
		{"free -m total at --memory 256m", both, section("free", "256")},
		// KNOWN-VISIBLE (documented): the host's clocks, as no time
		// namespace is used.
		{"the host's uptime in the boot and monotonic clocks", both, atLeast("clocks", hostUptime(t))},
		{"the host's uptime in a process's start time", both, atLeast("start", hostUptime(t))},
		{"no time namespace offsets", both, section("timens", "0 0\n0 0")},
		// /proc/irq shows the host's CPU mask, /proc/fs its disks.
		{"/proc/irq and /proc/fs masked", both, section("irq_fs", "0")},
		// KNOWN-VISIBLE (documented): the number of the host CPU the
		// sandbox may run on.
		{"one host CPU in Cpus_allowed_list at --cpus 1", both, func(sec map[string]string, _ string) (string, bool) {
			got := strings.TrimSpace(sec["cpus_allowed"])
			n, err := strconv.Atoi(got)
			return got, err == nil && n >= 0 && n < runtime.NumCPU()
		}},
	}
}

// devtmpfsSize is the size option of the host's /dev, which the kernel
// sizes by the host's memory.
func devtmpfsSize(t *testing.T) string {
	t.Helper()
	for _, l := range strings.Split(hostFile(t, "/proc/self/mountinfo"), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == "/dev" && strings.Contains(l, " devtmpfs ") {
			for _, opt := range strings.Split(f[len(f)-1], ",") {
				if strings.HasPrefix(opt, "size=") {
					return opt
				}
			}
		}
	}
	return "" // not a devtmpfs with a size: nothing to look for
}

// ownSysinfo checks sysinfoPy's line: the call succeeded with the
// sandbox's memory limit as total RAM and most of it free (a little is
// in use, by the probe itself where the cgroup's usage is read), no swap,
// no load, an uptime below the host's and a handful of processes (the
// init, sh and python), where the host's answer has its own figures; and
// EFAULT for a bad pointer, as the kernel answers.
func ownSysinfo(hostUp float64) func(map[string]string, string) (string, bool) {
	return func(sec map[string]string, _ string) (string, bool) {
		got := strings.TrimSpace(sec["sysinfo"])
		f := strings.Fields(got)
		if len(f) != 9 || strings.Join(f[:3], " ") != "0 0 268435456" || strings.Join(f[4:6], " ") != "0 0" || f[8] != "14" {
			return got + " (want: 0 0 268435456 FREE 0 0 UPTIME PROCS 14)", false
		}
		free, err0 := strconv.ParseUint(f[3], 10, 64)
		up, err1 := strconv.ParseFloat(f[6], 64)
		procs, err2 := strconv.Atoi(f[7])
		if err0 != nil || err1 != nil || err2 != nil || free > 256<<20 || free < 128<<20 || up >= hostUp || procs < 1 || procs > 16 {
			return fmt.Sprintf("%s (want 128 to 256 MiB free, an uptime below the host's %.0f s and 1 to 16 processes)", got, hostUp), false
		}
		return got, true
	}
}

// hostUptime is the host's uptime in seconds, read before the sandbox
// starts: the sandbox shares the host's clocks, which then read more.
func hostUptime(t *testing.T) float64 {
	t.Helper()
	up, err := strconv.ParseFloat(strings.Fields(hostFile(t, "/proc/uptime"))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return up
}

// hostSchedClock is where the host's own /proc/self/sched puts this
// process's se.exec_start, in seconds, read before the sandbox starts: the
// scheduler's clock, which counts from the host's boot but may fall behind
// /proc/uptime (a VM host whose guest was paused: 91 s behind on one CI
// machine), so the sandbox's figure is checked against the same clock.
// Each CPU keeps its own (25 s apart on one CI run's VM), so the check
// takes half of it: a count from the sandbox's start would be seconds.
func hostSchedClock(t *testing.T) float64 {
	t.Helper()
	for _, line := range strings.Split(hostFile(t, "/proc/self/sched"), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "se.exec_start" {
			ms, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				t.Fatalf("se.exec_start in /proc/self/sched: %v", err)
			}
			return ms / 1000
		}
	}
	t.Fatal("no se.exec_start in the host's /proc/self/sched")
	return 0
}

// atLeast checks that every number in section name is at least limit, a
// host clock's reading (in seconds) taken before the run.
func atLeast(name string, limit float64) func(map[string]string, string) (string, bool) {
	return func(sec map[string]string, _ string) (string, bool) {
		got := strings.TrimSpace(sec[name])
		fields := strings.Fields(got)
		for _, f := range fields {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil || v < limit {
				return got + " (the host's clock read " + strconv.FormatFloat(limit, 'f', 0, 64) + " s before the run)", false
			}
		}
		return got, len(fields) > 0
	}
}

// TestPosture runs a probe of what the sandbox sees of its machine and
// checks it finds no host identifier and sees its own limits.
func TestPosture(t *testing.T) {
	checks := postureChecks(t)
	for _, b := range conformanceBackends(t) {
		if b == "gvisor" {
			continue // gVisor's /proc is its own kernel's by design
		}
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			r := runJSON(t, "--backend", b, "--cpus", "1", "--memory", "256m", "--", "sh", "-c", postureScript)
			if r.ExitCode != 0 {
				t.Fatalf("probe: exit %d, stderr %q, error %q", r.ExitCode, r.Stderr, r.Error)
			}
			checkPosture(t, b, checks, r)
		})
	}
}

func checkPosture(t *testing.T, backend string, checks []postureCheck, r spec.Result) {
	t.Helper()
	sec := postureSections(r.Stdout)
	for _, c := range checks {
		if !slices.Contains(c.backends, backend) {
			continue
		}
		if got, ok := c.check(sec, r.Stdout); !ok {
			t.Errorf("%s: got %q", c.name, got)
		}
	}
}

// mountRoots are the root fields (the path within the file system) of
// the probe's mountinfo section, one per line.
func mountRoots(sec map[string]string) string {
	var roots []string
	for _, l := range strings.Split(sec["mountinfo"], "\n") {
		if f := strings.Fields(l); len(f) > 4 {
			roots = append(roots, f[3]+" on "+f[4])
		}
	}
	return strings.Join(roots, "\n")
}

// TestPostureKnownVisible checks what the docs say a native sandbox still
// sees of the host in two set-ups, so that a change is noticed: a
// --workspace directory's host path, and a rootless sandbox's host uid,
// devtmpfs size (the host's memory) and /etc template path.
func TestPostureKnownVisible(t *testing.T) {
	requireSandbox(t)
	t.Run("workspace", func(t *testing.T) {
		ws := hostWorkspace(t, t.TempDir())
		r := runJSON(t, "--cpus", "1", "--workspace", ws, "--", "sh", "-c", postureScript)
		if r.ExitCode != 0 || r.Error != "" {
			t.Fatalf("probe: exit %d, stderr %q, error %q", r.ExitCode, r.Stderr, r.Error)
		}
		if roots := mountRoots(postureSections(r.Stdout)); !strings.Contains(roots, filepath.Base(ws)+" on /workspace") {
			t.Errorf("mountinfo roots %q: want the workspace's host path (%s) on /workspace, as documented", roots, ws)
		}
	})
	t.Run("rootless", func(t *testing.T) {
		prefix := asNobody(t)
		r := runRootless(t, prefix, append(rootlessFlags, "--", "sh", "-c", postureScript)...)
		sec := postureSections(r.Stdout)
		// --memory 0 (rootlessFlags): the sandbox may use all the host's
		// memory, and meminfo says so.
		if got, want := strings.Fields(sec["/proc/meminfo"]), strings.Fields(hostFile(t, "/proc/meminfo"))[1]; len(got) < 2 || got[1] != want {
			t.Errorf("MemTotal at --memory 0: got %q, want the host's %s kB", got[:min(len(got), 3)], want)
		}
		if got, want := strings.TrimSpace(sec["uid_map"]), "1000 65534 1"; got != want {
			t.Errorf("uid_map: got %q, want the host uid as documented, %q", got, want)
		}
		if size := devtmpfsSize(t); size != "" && !strings.Contains(sec["mountinfo"], size) {
			t.Errorf("mountinfo: want the host devtmpfs's %s as documented:\n%s", size, sec["mountinfo"])
		}
		if roots := mountRoots(sec); !strings.Contains(roots, "warden-etc-65534/etc-") {
			t.Errorf("mountinfo roots %q: want the /etc template's host path as documented", roots)
		}
	})
}
