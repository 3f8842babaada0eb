package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/rootfs"
)

// diffSpec is one sandbox spec the differential test builds both ways.
type diffSpec struct {
	name  string
	flags []string
	// rootless runs warden as nobody (asNobody, resolved in the spec's
	// own subtest, so a host without setpriv skips only this spec).
	rootless bool
	// prefix runs warden under another user: set from rootless.
	prefix []string
	// viaStdin delivers the probe on stdin into the sandbox's own
	// /workspace tmpfs (a shell copies it there and execs it), for specs
	// whose workspace is not the probe's host directory.
	viaStdin bool
	// fastRefusal, when set, is the feature warden's refusal of
	// --executor fast for this spec must name (nsinit.ExecPlan leaves
	// --net proxy and a template's root to the Go init); the second run
	// then takes auto, which is the Go init, and the test logs it. Any
	// other spec must run fast.
	fastRefusal string
	// expected are the spec's own inherent differences (field: why), on
	// top of expectedExecutorDiffs.
	expected map[string]string
}

// diffSpecs are the specs compared; template adds one when the test
// images exist.
func diffSpecs(t *testing.T) []diffSpec {
	return []diffSpec{
		{name: "default", viaStdin: true},
		{name: "limits", flags: []string{"--memory", "256MiB", "--cpus", "1", "--pids", "64", "--net", "none"}, viaStdin: true},
		{name: "disk", flags: []string{"--disk", "64MiB"}, viaStdin: true},
		{name: "open files", flags: []string{"--open-files", "32"}, viaStdin: true},
		{name: "workspace", flags: []string{"--workspace", diffProbeWorkspace(t)}},
		{name: "proxy", flags: []string{"--net", "proxy", "--allow", "allowed.test"}, viaStdin: true, fastRefusal: "--net proxy"},
		{name: "rootless", flags: rootlessFlags, rootless: true, viaStdin: true, expected: map[string]string{
			"Rlimits/NPROC": "rootless, RLIMIT_NPROC also counts PID 1's own tasks: warden-exec adds its one, the Go init ten for its threads (TestExecutorRootlessPids)",
		}},
	}
}

// TestExecutorDiff builds each spec under both executors and fails on
// any difference in what the probe sees, except those listed in
// expectedExecutorDiffs.
func TestExecutorDiff(t *testing.T) {
	p := executors(t)
	for _, s := range diffSpecs(t) {
		t.Run(s.name, func(t *testing.T) {
			if s.rootless {
				s.prefix = asNobody(t)
			}
			compareSpec(t, p, s)
		})
	}
	t.Run("template", func(t *testing.T) {
		state := minimalTemplate(t)
		// A template's root is built by the Go init (nsinit.ExecPlan).
		s := diffSpec{name: "template", flags: []string{"--state-dir", state, "--template", "minimal", "--workspace", diffProbeWorkspace(t)}, fastRefusal: "a template's root"}
		compareSpec(t, p, s)
	})
}

// compareSpec runs s on both sides and compares the normalised reports.
func compareSpec(t *testing.T, p executorPair, s diffSpec) {
	var reports [2]map[string]string
	for i, side := range p.sides {
		reports[i] = normalise(probeReport(t, s, side, i == 1))
	}
	for _, d := range diffReports(reports[0], reports[1]) {
		why, ok := expectedExecutorDiffs[d.field]
		if !ok {
			why, ok = s.expected[d.field]
		}
		if ok {
			t.Logf("%s: expected difference (%s): %s %q, %s %q", d.field, why, p.sides[0].name, d.a, p.sides[1].name, d.b)
			continue
		}
		t.Errorf("spec %s: %s: %s got %q, %s got %q", s.name, d.field, p.sides[0].name, d.a, p.sides[1].name, d.b)
	}
}

// probeReport runs the probe for s on one side and decodes its report.
func probeReport(t *testing.T, s diffSpec, side executorSide, second bool) probeOutput {
	t.Helper()
	args := probeArgs(t, s, side.flags)
	stdin := ""
	if s.viaStdin {
		b, err := os.ReadFile(filepath.Join(diffProbeWorkspace(t), "diffprobe"))
		if err != nil {
			t.Fatal(err)
		}
		stdin = string(b)
	}
	inv := wardenAs(t, s.prefix, stdin, args...)
	if second && s.fastRefusal != "" && fastRefused(inv) {
		if !strings.Contains(inv.stderr, s.fastRefusal) || strings.Count(inv.stderr, "\n") > 1 {
			t.Fatalf("%s: warden refused --executor fast with %q, want one line naming %q", s.name, inv.stderr, s.fastRefusal)
		}
		t.Logf("%s: warden refused --executor fast (%s); the second run takes --executor auto, which falls back to the Go init: both runs are go", s.name, strings.TrimSpace(inv.stderr))
		args = probeArgs(t, s, []string{"--executor", "auto"})
		inv = wardenAs(t, s.prefix, stdin, args...)
	}
	return decodeProbe(t, side.name, inv)
}

// probeArgs is the `warden run --json` command line of s: the probe
// reports the masked /proc paths and the read-only ones.
func probeArgs(t *testing.T, s diffSpec, executor []string) []string {
	t.Helper()
	args := append(append(append([]string{"run", "--json", "--timeout", "60s"}, executor...), s.flags...), "--")
	procPaths := append(slices.Clone(rootfs.MaskedProcPaths), rootfs.ReadonlyProcPaths...)
	if s.viaStdin {
		// The shell execs the probe: it keeps the shell's pid, and its
		// descriptors are those warden gave (stdin at its end).
		script := `cat > /workspace/diffprobe && chmod 755 /workspace/diffprobe && exec /workspace/diffprobe "$@"`
		return append(append(args, "sh", "-c", script, "diffprobe"), procPaths...)
	}
	return append(append(args, "/workspace/diffprobe"), procPaths...)
}

// probeOutput is the probe's report as decoded from JSON: every field
// a string, a list of strings, a map of strings or a number.
type probeOutput map[string]any

// decodeProbe checks the run and decodes the probe's report.
func decodeProbe(t *testing.T, side string, inv invocation) probeOutput {
	t.Helper()
	var r struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
		Error    string `json:"error"`
	}
	if err := json.Unmarshal([]byte(inv.stdout), &r); err != nil {
		t.Fatalf("%s: warden exit %d, stdout %q, stderr %q: not a Result: %v", side, inv.code, inv.stdout, inv.stderr, err)
	}
	if r.Error != "" || r.ExitCode != 0 {
		t.Fatalf("%s: probe exit %d, error %q, stderr %q", side, r.ExitCode, r.Error, r.Stderr)
	}
	var out probeOutput
	if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil {
		t.Fatalf("%s: probe printed %q: not its report: %v", side, r.Stdout, err)
	}
	return out
}

// TestExecutorSyscallPolicy: every check of testdata/probe's syscall
// table (syscallPolicy) answers the same under both executors.
func TestExecutorSyscallPolicy(t *testing.T) {
	p := executors(t)
	var lines [2]map[string]string
	for i, side := range p.sides {
		lines[i] = probeLines(t, runProbeResult(t, probeWorkspace(t), side.flags, "all"))
	}
	for _, d := range diffReports(lines[0], lines[1]) {
		t.Errorf("probe all: %s: %s got %q, %s got %q", d.field, p.sides[0].name, d.a, p.sides[1].name, d.b)
	}
}

// cStatusFields are the lines of /proc/self/status compared for a C
// program: the Go probe's own runtime catches every signal, so the
// dispositions the executor hands over are read by cat instead.
var cStatusFields = []string{"Umask", "State", "Uid", "Gid", "Groups", "NSpid", "PPid", "SigQ", "SigPnd", "ShdPnd",
	"SigBlk", "SigIgn", "SigCgt", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp",
	"Seccomp_filters", "Speculation_Store_Bypass", "Mems_allowed_list"}

// TestExecutorSignals: a program that sets no handler of its own (cat)
// starts with the same blocked, ignored and caught signals, and the same
// status otherwise, under both executors. Its parent must be PID 1 on
// both sides; its own pid is compared by rank (catPid).
func TestExecutorSignals(t *testing.T) {
	p := executors(t)
	var got [2]map[string]string
	for i, side := range p.sides {
		r := runJSON(t, append(side.flags, "--", "cat", "/proc/self/status")...)
		if r.ExitCode != 0 || r.Error != "" {
			t.Fatalf("%s: cat /proc/self/status: exit %d, error %q, stderr %q", side.name, r.ExitCode, r.Error, r.Stderr)
		}
		got[i] = map[string]string{}
		for _, l := range strings.Split(r.Stdout, "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && slices.Contains(cStatusFields, k) {
				got[i][k] = strings.Join(strings.Fields(v), " ")
			}
		}
		if got[i]["PPid"] != "1" {
			t.Errorf("%s: cat's PPid %q, want 1 (the executor is PID 1 and its parent)", side.name, got[i]["PPid"])
		}
		got[i]["NSpid"] = catPid(got[i]["NSpid"])
	}
	for _, d := range diffReports(got[0], got[1]) {
		t.Errorf("status of cat: %s: %s got %q, %s got %q", d.field, p.sides[0].name, d.a, p.sides[1].name, d.b)
	}
}

// catPid is cat's pid by rank, as the diff test compares pids: the
// sandbox holds only PID 1 and cat, so any pid above 1 is rank 2. Its
// number is not compared: the Go init's runtime threads take pids before
// the program is forked (cat is 7 or so under it, 2 under a C init).
func catPid(nspid string) string {
	if n, err := strconv.Atoi(nspid); err == nil && n > 1 {
		return "rank2"
	}
	return nspid
}

// forkProbe is a python program (python3 -c forkProbe MOST) that forks
// up to MOST sleepers, until a fork fails, kills and reaps them, and
// prints how many forks succeeded: the program's share of RLIMIT_NPROC,
// or of gVisor's bound on its pids.
const forkProbe = `
import os, signal, sys, time
kids = []
for _ in range(int(sys.argv[1])):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.kill(k, signal.SIGKILL)
for k in kids:
    os.waitpid(k, 0)
print(len(kids))
`

// TestExecutorRootlessPids: rootless, RLIMIT_NPROC counts PID 1's own
// tasks beside the program's, so each executor adds its own: warden-exec
// is one task, and the program gets exactly --pids (itself and pids-1
// forks), as under root; the Go init adds head-room for its threads, so
// the program gets at least that (their counts differ by design).
func TestExecutorRootlessPids(t *testing.T) {
	p := executors(t)
	prefix := asNobody(t)
	const pids = 8
	for _, side := range p.sides {
		args := append(append(append([]string{"run", "--json"}, side.flags...), rootlessFlags...), "--pids", strconv.Itoa(pids), "--timeout", "60s", "--", "python3", "-c", forkProbe, "32")
		inv := wardenAs(t, prefix, "", args...)
		var r struct {
			ExitCode int    `json:"exit_code"`
			Stdout   string `json:"stdout"`
			Stderr   string `json:"stderr"`
		}
		if err := json.Unmarshal([]byte(inv.stdout), &r); err != nil || r.ExitCode != 0 {
			t.Fatalf("%s: warden exit %d, stdout %q, stderr %q", side.name, inv.code, inv.stdout, inv.stderr)
		}
		forks, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
		if err != nil {
			t.Fatalf("%s: the fork counter printed %q (stderr %q)", side.name, r.Stdout, r.Stderr)
		}
		want, exact := pids-1, side.name == "fast"
		if (exact && forks != want) || forks < want {
			t.Errorf("%s: --pids %d rootless: %d forks succeeded, want %s%d", side.name, pids, forks, map[bool]string{true: "", false: "at least "}[exact], want)
		}
		t.Logf("%s: --pids %d rootless: %d forks succeeded", side.name, pids, forks)
	}
}

// TestExecutorLowOpenFiles: around the lowest --open-files either
// executor can start a program at (fast 15, go 13 or 14), the default
// executor (auto) ends a run as the Go init does: the same exit code and
// warden line, as auto leaves specs below nsinit.MinFastOpenFiles to the
// Go init and a failed fork/exec of warden-exec's is the Go init's exit
// 126.
func TestExecutorLowOpenFiles(t *testing.T) {
	p := executors(t)
	if p.sides[1].name != "fast" {
		t.Skip("no fast executor to compare: " + p.note)
	}
	// Not 13 or 14: at its own edge the Go init starts the program or not
	// from one run to the next (its runtime's descriptors vary).
	for _, n := range []string{"10", "12", "15", "16", "20"} {
		var got [2]invocation
		for i, flags := range [][]string{{"--executor", "go"}, {"--executor", "auto"}} {
			got[i] = warden(t, "", append(append([]string{"run"}, flags...), "--memory", "256MiB", "--open-files", n, "--", "sh", "-c", "echo ran")...)
		}
		if got[0].code != got[1].code || got[0].stdout != got[1].stdout || got[0].stderr != got[1].stderr {
			t.Errorf("--open-files %s: go: exit %d, stdout %q, stderr %q; auto: exit %d, stdout %q, stderr %q", n,
				got[0].code, got[0].stdout, got[0].stderr, got[1].code, got[1].stdout, got[1].stderr)
		}
	}
}
