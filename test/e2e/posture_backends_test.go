package e2e

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// postureCases are, per backend, what a sandbox of that backend must not
// learn about the host or reach of Warden's agent, beyond the common
// conformance cases: each backend hides what its technology lets it
// (docs/sandbox.md and docs/backends.md say what each cannot).
func postureCases() map[string][]conformanceCase {
	bin := filepath.Dir(wardenBin)
	return map[string][]conformanceCase{
		"docker": {
			// The root's overlay mount names Docker's layer directories and
			// cannot be hidden; every other mount names no host path.
			{name: "mountinfo names no host path", script: "awk '$5 != \"/\"' /proc/self/mountinfo | grep -E '/var/lib/docker|/run/warden|/docker/|" + bin + "'; echo done",
				check: wantExit(0, "done")},
			{name: "own cgroup namespace", script: "grep -v ':/$' /proc/self/cgroup; echo done", check: wantExit(0, "done")},
			// Docker's own hostname file would be bound from its container
			// directory, named in mountinfo by its host path and the
			// container id; Warden's comes from the box's scratch tmpfs.
			{name: "hostname file is Warden's", script: "awk '$5 == \"/etc/hostname\" {print $4}' /proc/self/mountinfo; cat /etc/hostname",
				check: wantExit(0, "/hostname\nsandbox")},
			// The box's view files are root's, mode 0444, bound read-only
			// from its scratch tmpfs (a box without the view shows the
			// host's meminfo, unbound), so its user cannot change them.
			{name: "view files unwritable", flags: []string{"--memory", "256m"},
				script: "{ echo 1 >/proc/meminfo || chmod 666 /proc/meminfo; } 2>/dev/null && echo wrote; stat -c %a:%u /proc/meminfo; " +
					"awk '$5 == \"/proc/meminfo\" {split($6, o, \",\"); print $4, o[1]}' /proc/self/mountinfo; awk '/^MemTotal:/ {print $2}' /proc/meminfo",
				check: wantExit(0, "444:0\n/view/meminfo ro\n262144")},
		},
		"microvm": {
			// One box (each boots a VM): the guest's PID 1 is the agent,
			// which the guest kernel keeps from the user's uid; the agent's
			// port (/dev/vport*, the virtio-ports links) is no node of the
			// box's /dev; and no host state path of Warden's is there. Its
			// exe is the initramfs's /init below the box's root, and its
			// cmdline the kernel's: neither may be reached.
			{name: "agent, its port and Warden's state out of reach",
				script: "for f in environ maps status cmdline; do cat /proc/1/$f >/dev/null 2>&1 && echo read $f; done; ls /proc/1/fd >/dev/null 2>&1 && echo listed fd; " +
					"readlink /proc/1/exe >/dev/null 2>&1 && echo read exe; cat /proc/1/exe >/dev/null 2>&1 && echo opened exe; " +
					"ls -d /dev/vport* /dev/virtio-ports /dev/hvc* 2>/dev/null; ls -d /run/warden /run/warden-microvm 2>/dev/null; echo done",
				check: wantExit(0, "done")},
		},
		"gvisor": {
			// runsc (2022) shows every task's files to every user by their
			// mode alone: PID 1 of the user's namespace, the user's agent,
			// covers its /proc/1.
			{name: "agent's proc files unreadable", script: "for f in environ maps smaps auxv status; do cat /proc/1/$f >/dev/null 2>&1 && echo read $f; done; ls /proc/1/fd >/dev/null 2>&1 && echo listed fd; echo done",
				check: wantExit(0, "done")},
			// The agent's threads had ids in the user's PID namespace, and
			// runsc shows every task's files to every user: no task but the
			// user's own may be read.
			{name: "no task beyond the user's readable", script: "exec python3 -c '" + tasksProbe + "'", check: wantExit(0, "done")},
			// tasksProbe passes the user's agent over (the sandbox user's,
			// without capabilities): what it holds is pinned here.
			{name: "user's agent out of reach", script: "exec python3 -c '" + agentProbe + "'", check: wantExit(0, "done")},
			{name: "no devices beyond the native box's", script: "python3 -c '\nimport os\nfor d in (\"/dev/fuse\", \"/dev/net/tun\", \"/dev/ptmx\", \"/dev/pts/ptmx\", \"/dev/tty\"):\n try:\n  os.close(os.open(d, os.O_RDWR)); print(\"opened\", d)\n except OSError:\n  pass\nprint(\"done\")'",
				check: wantExit(0, "done")},
		},
	}
}

// tasksProbe prints each task the sandbox user can read the environ,
// maps or status of, other than its own threads and the sandbox user's
// processes without any capability (the user's agent is one): every task
// listed under /proc/*/task and every task id up to 4096, which
// covers the ids the agent's threads had (2, 3, 4, 5, 7 with runsc 2022).
const tasksProbe = `
import os, re
me = set(os.listdir("/proc/self/task"))
ids = set(str(i) for i in range(1, 4097))
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            ids.update(os.listdir("/proc/" + p + "/task"))
        except OSError:
            pass
def read(path):
    try:
        with open(path, "rb") as f:
            return f.read(1 << 16)
    except OSError:
        return None
user = re.compile(rb"^Uid:\t%d\t%d\t%d\t%d$" % ((os.getuid(),) * 4), re.M)
nocaps = re.compile(rb"^CapPrm:\t0+$.*^CapEff:\t0+$.*^CapBnd:\t0+$", re.M | re.S)
for t in sorted(ids - me, key=int):
    got = {f: read("/proc/" + t + "/" + f) for f in ("environ", "maps", "status")}
    st = got["status"]
    if st is not None and user.search(st) and nocaps.search(st):
        continue
    seen = sorted(f for f, v in got.items() if v is not None)
    if seen:
        print("read", t, seen, (st or b"").split(b"\n")[0])
print("done")`

// agentProbe prints what the user can reach of the user's agent, PID 1 of
// its namespace: through /proc/1 and through every other path to its
// tasks (/proc/<tid> of each of its threads, which runsc resolves though
// it lists them not, and /proc/<any>/task/1). The agent is the sandbox
// user's but non-dumpable: its mem, exe, cwd and root must not open, no
// fd/N but /dev/null may, and ptrace and process_vm_readv are refused.
// Its environ does open through its other threads' paths (the cover of
// /proc/1 hides that path only) but is empty: it is started with none.
// prlimit(2) is not refused (the same uid may, dumpable or not).
const agentProbe = `
import ctypes, os, stat
libc = ctypes.CDLL(None, use_errno=True)
null = os.stat("/dev/null").st_rdev
def tgid(t):
    try:
        with open("/proc/" + t + "/status") as f:
            for l in f:
                if l.startswith("Tgid:"):
                    return l.split()[1]
    except OSError:
        return None
ids = set(str(i) for i in range(1, 4097))
ids.update(p for p in os.listdir("/proc") if p.isdigit())
paths = set()
for t in ids:
    if tgid(t) == "1":
        paths.add("/proc/" + t)
    if os.path.exists("/proc/" + t + "/task/1"):
        paths.add("/proc/" + t + "/task/1")
if not paths:
    print("no task of the agent found")
for d in sorted(paths):
    for f in ("mem", "exe", "cwd", "root"):
        try:
            os.close(os.open(d + "/" + f, os.O_RDONLY))
            print("opened", d + "/" + f)
        except OSError:
            pass
    try:
        with open(d + "/environ", "rb") as f:
            if f.read(1):
                print("read environ of", d)
    except OSError:
        pass
    try:
        fds = os.listdir(d + "/fd")
    except OSError:
        fds = []
    for n in sorted(set(fds) | set(str(i) for i in range(16))):
        try:
            fd = os.open(d + "/fd/" + n, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        st = os.fstat(fd)
        os.close(fd)
        if not (stat.S_ISCHR(st.st_mode) and st.st_rdev == null):
            print("opened", d + "/fd/" + n)
if libc.ptrace(16, 1, None, None) == 0:
    libc.ptrace(17, 1, None, None)
    print("ptrace attached 1")
buf = ctypes.create_string_buffer(8)
class iov(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
local = iov(ctypes.cast(buf, ctypes.c_void_p), 8)
remote = iov(0x400000, 8)
if libc.process_vm_readv(1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) >= 0 or ctypes.get_errno() not in (1, 13):
    print("process_vm_readv 1 errno", ctypes.get_errno())
print("done")`

// TestBackendPosture runs each backend's posture cases on it.
func TestBackendPosture(t *testing.T) {
	cases := postureCases()
	for _, b := range conformanceBackends(t) {
		if len(cases[b]) == 0 {
			continue
		}
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			for _, c := range cases[b] {
				t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
					c.check(t, sh(t, c.script, append([]string{"--backend", b}, c.flags...)...))
				})
			}
		})
	}
}

// schedProbe prints the niceness and the number of CPUs a fresh process
// of the session starts with.
const schedProbe = "import os; print(os.getpriority(os.PRIO_PROCESS, 0), len(os.sched_getaffinity(0)))"

// TestGVisorAgentSchedulingDoesNotReachExecs: runsc (2022) lets the user
// set PID 1's niceness and CPU affinity, which every process the agent
// forks would inherit; the agent restores its own before each fork, so an
// exec that changed them leaves the next exec as the first began.
func TestGVisorAgentSchedulingDoesNotReachExecs(t *testing.T) {
	requireBackend(t, "gvisor")
	srv := startServer(t, "--backend", "gvisor")
	id := srv.newSession(t, keyA, nil)
	run := func(code string) string {
		t.Helper()
		var r spec.Result
		srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), map[string]any{"command": []string{"python3", "-c", code}}, http.StatusOK, &r)
		if r.ExitCode != 0 {
			t.Fatalf("exec %q: exit %d, stderr %q", code, r.ExitCode, r.Stderr)
		}
		return strings.TrimSpace(r.Stdout)
	}
	before := run(schedProbe)
	tamper := "import os\ntry:\n os.setpriority(os.PRIO_PROCESS, 1, -20); os.sched_setaffinity(1, {0}); print('changed')\nexcept OSError as e:\n print('refused', e.errno)"
	t.Logf("changing PID 1's scheduling: %s", run(tamper))
	if after := run(schedProbe); after != before {
		t.Errorf("niceness and CPUs of a new exec: %q after PID 1's were changed, %q before; want them unchanged", after, before)
	}
}

// TestCPUsWithinWardens: a sandbox never sees or gets CPUs Warden may not
// use. Under `taskset -c 0` a box at --cpus 2, or with no quota, counts
// and runs on CPU 0 alone: native's init inherits Warden's affinity, and
// docker's cpuset is chosen from it.
func TestCPUsWithinWardens(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs a host of two CPUs or more")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("taskset is not installed (apt-get install util-linux)")
	}
	const probe = "nproc; grep -c ^processor /proc/cpuinfo; awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status"
	for _, b := range conformanceBackends(t) {
		if b == "gvisor" {
			continue // gVisor's CPUs are its own kernel's
		}
		for _, cpus := range []string{"2", "0"} {
			t.Run(b+"_cpus_"+cpus, func(t *testing.T) {
				requireBackend(t, b)
				inv := wardenAs(t, []string{"taskset", "-c", "0"}, "", "run", "--json", "--backend", b, "--cpus", cpus, "--", "sh", "-c", probe)
				var r spec.Result
				if err := json.Unmarshal([]byte(inv.stdout), &r); err != nil {
					t.Fatalf("exit %d, stdout %q, stderr %q: not a Result: %v", inv.code, inv.stdout, inv.stderr, err)
				}
				wantExit(0, "1\n1\n0")(t, r)
			})
		}
	}
}

// TestCPUsAboveTheHost: a --cpus above the host's cores runs on every
// backend, as on native; Docker's engine refused it ("Range of CPUs is
// from 0.01 to N") until the docker backend clamped the quota to the
// box's cpuset, which then holds all of Warden's CPUs.
func TestCPUsAboveTheHost(t *testing.T) {
	for _, b := range conformanceBackends(t) {
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			r := sh(t, "nproc", "--backend", b, "--cpus", strconv.Itoa(runtime.NumCPU()+1))
			wantExit(0, "")(t, r)
		})
	}
}

// TestGVisorKilledAgentIsNamed: gVisor delivers SIGKILL to a PID
// namespace's init from inside it, so the user's code can kill the user's
// agent, ending its own sandbox; the error says so (the init's exit
// status 113) and does not blame --memory, as it did before.
func TestGVisorKilledAgentIsNamed(t *testing.T) {
	requireSandbox(t)
	requireBackend(t, "gvisor")
	r := sh(t, "kill -KILL 1; sleep 5", "--backend", "gvisor", "--memory", "256M")
	if want := "killed or stopped its agent (PID 1)"; !strings.Contains(r.Error, want) || strings.Contains(r.Error, "--memory") {
		t.Errorf("run that killed PID 1: error %q, want one naming %q and not --memory", r.Error, want)
	}
}

// TestGVisorPidsBound: on gVisor the user's agent's threads run as the
// sandbox user, so RLIMIT_NPROC gets room for them (userAgentTasks, 12),
// which the user's processes may take when the agent has fewer: the
// user gets at most --pids plus that room (measured: 28 with --pids 20;
// 20 on native).
func TestGVisorPidsBound(t *testing.T) {
	requireSandbox(t)
	requireBackend(t, "gvisor")
	const pids, room = 20, 12
	r := runJSON(t, "--backend", "gvisor", "--pids", "20", "--", "python3", "-c", forkProbe, "200")
	n, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("fork probe: exit %d, stdout %q, stderr %q, error %q", r.ExitCode, r.Stdout, r.Stderr, r.Error)
	}
	if got := n + 1; got > pids+room {
		t.Errorf("--pids %d on gVisor let the user run %d processes, want at most %d", pids, got, pids+room)
	}
}
