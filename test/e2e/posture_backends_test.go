package e2e

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// postureCases are, per backend, what a sandbox of that backend must not
// learn about the host or reach of Warden's agent, beyond the common
// conformance cases: each backend hides what its technology lets it
// (docs/architecture.md says what each cannot).
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
		"gvisor": {
			// runsc (2022) shows PID 1's files to every user by their mode
			// alone: the agent, uid 0, hides its /proc/1.
			{name: "agent's proc files unreadable", script: "for f in environ maps smaps auxv status; do cat /proc/1/$f >/dev/null 2>&1 && echo read $f; done; ls /proc/1/fd >/dev/null 2>&1 && echo listed fd; echo done",
				check: wantExit(0, "done")},
			// The agent's other threads stay readable as /proc/<tid>
			// (documented); what the user may do to them stays bounded.
			{name: "agent's threads out of reach", script: agentThreadsProbe, check: wantExit(0, "done")},
			{name: "no devices beyond the native box's", script: "python3 -c '\nimport os\nfor d in (\"/dev/fuse\", \"/dev/net/tun\", \"/dev/ptmx\", \"/dev/pts/ptmx\", \"/dev/tty\"):\n try:\n  os.close(os.open(d, os.O_RDWR)); print(\"opened\", d)\n except OSError:\n  pass\nprint(\"done\")'",
				check: wantExit(0, "done")},
		},
	}
}

// agentThreadsProbe prints what the user can do to a uid-0 thread of the
// agent beyond reading its documented /proc files: its memory, its exe,
// cwd and root links, a descriptor other than /dev/null, a signal. It
// expects runsc to list the agent's thread ids in /proc/2/task, and
// prints "no agent threads" if it does not, which fails the case so that
// a change of runsc is noticed.
const agentThreadsProbe = `python3 -c '
import os
try:
    tids = [t for t in os.listdir("/proc/2/task") if t != "1"]
except OSError:
    tids = []
if not tids:
    print("no agent threads")
for t in tids:
    p = "/proc/" + t
    for f in ("mem", "exe", "cwd", "root"):
        try:
            open(p + "/" + f, "rb").close(); print("opened", t, f)
        except OSError:
            pass
    for fd in os.listdir(p + "/fd"):
        try:
            x = os.open(p + "/fd/" + fd, os.O_RDONLY)
        except OSError:
            continue
        if not os.path.samefile("/proc/self/fd/%d" % x, "/dev/null") and os.readlink(p + "/fd/" + fd) != "/proc/1/oom_score_adj":
            print("opened", t, "fd", fd, os.readlink(p + "/fd/" + fd))
        os.close(x)
    try:
        os.kill(int(t), 0); print("signalled", t)
    except OSError:
        pass
print("done")'`

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
