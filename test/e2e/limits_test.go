package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Every test here first proves that the limit is in force (the kernel shows
// it to the program, or the sandbox's cgroup holds it while the program
// runs), then runs a bomb against it. Each bomb is bounded by itself, so a
// broken limit makes the test fail rather than hang or eat the host.

// TestLimitTimeout checks the wall-clock limit: a program within it ends
// normally, one past it is killed, reported as timed out, and the CLI exits
// 124 with one line saying so.
func TestLimitTimeout(t *testing.T) {
	requireSandbox(t)
	if r := runJSON(t, "--timeout", "5s", "--", "sleep", "0.1"); r.TimedOut || r.ExitCode != 0 {
		t.Fatalf("sleep 0.1 under --timeout 5s: timed_out %v exit %d, want false 0", r.TimedOut, r.ExitCode)
	}
	r := runJSON(t, "--timeout", "1s", "--", "sleep", "30")
	if !r.TimedOut || r.ExitCode != 137 || r.Signal != "SIGKILL" || r.OOMKilled || r.Error != "" {
		t.Errorf("sleep 30 under --timeout 1s: timed_out %v exit_code %d signal %q oom %v error %q, want true 137 \"SIGKILL\" false \"\"",
			r.TimedOut, r.ExitCode, r.Signal, r.OOMKilled, r.Error)
	}
	inv := warden(t, "", "run", "--timeout", "1s", "--", "sleep", "30")
	if inv.code != 124 {
		t.Errorf("CLI exit code %d, want 124", inv.code)
	}
	checkOneLine(t, inv.stderr, "timed out", "--timeout")
}

// TestLimitMemory checks that a program allocating past --memory is killed
// by the kernel and reported as OOM-killed.
func TestLimitMemory(t *testing.T) {
	requireSandbox(t)
	got := liveCgroup(t, "--memory", "64MiB")
	if got.memory != 64*spec.MiB {
		t.Fatalf("sandbox cgroup memory limit is %d, want %d: the limit is not in force", got.memory, 64*spec.MiB)
	}
	// 40 steps of 10 MB, each written so the pages are really resident.
	bomb := `
import sys
held = []
for i in range(40):
    held.append(b"x" * (10 * 1000 * 1000))
    print(i, flush=True)
print("survived 400 MB")
`
	r := runJSON(t, "--memory", "64MiB", "--timeout", "60s", "--", "python3", "-c", bomb)
	if !r.OOMKilled || r.ExitCode != 137 || r.Signal != "SIGKILL" || r.TimedOut {
		t.Errorf("oom_killed %v exit_code %d signal %q timed_out %v, want true 137 \"SIGKILL\" false (stderr %q)",
			r.OOMKilled, r.ExitCode, r.Signal, r.TimedOut, r.Stderr)
	}
	if strings.Contains(r.Stdout, "survived") {
		t.Errorf("the bomb held 400 MB under a 64 MiB limit: stdout %q", r.Stdout)
	}
	if r.PeakMemoryBytes <= 0 || r.PeakMemoryBytes > 64*spec.MiB {
		t.Errorf("peak_memory_bytes = %d, want in (0, %d]", r.PeakMemoryBytes, 64*spec.MiB)
	}
}

// TestLimitMemoryCountsTmpfs fills /tmp (a tmpfs, whose pages are charged
// to the sandbox's memory cgroup) past --memory. The kernel must OOM-kill in
// the sandbox, and Warden must report it and return, whichever process the
// kernel picked (its own init included).
func TestLimitMemoryCountsTmpfs(t *testing.T) {
	requireSandbox(t)
	script := `head -c 64000000 /dev/zero > /tmp/fill; echo "size=$(stat -c %s /tmp/fill)"`
	r, ok := runJSONWithin(t, 20*time.Second, "--memory", "16MiB", "--timeout", "5s", "--", "sh", "-c", script)
	if !ok {
		t.Fatalf("warden did not return within 20 s of a run with --timeout 5s whose tmpfs filled the memory limit")
	}
	if !r.OOMKilled || r.TimedOut || r.Error != "" {
		t.Errorf("oom_killed %v timed_out %v error %q, want true false \"\" (exit %d signal %q)", r.OOMKilled, r.TimedOut, r.Error, r.ExitCode, r.Signal)
	}
	if strings.Contains(r.Stdout, "size=64000000") {
		t.Errorf("64 MB fit in /tmp under --memory 16MiB: stdout %q", r.Stdout)
	}
}

// runJSONWithin is runJSON bounded by d: it reports false, after killing
// warden, if warden has not returned by then.
func runJSONWithin(t *testing.T, d time.Duration, args ...string) (spec.Result, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, wardenBin, append([]string{"run", "--json"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	if ctx.Err() != nil {
		return spec.Result{}, false
	}
	var r spec.Result
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("warden run %q: stdout %q stderr %q: not a Result: %v", args, out, stderr.String(), err)
	}
	return r, true
}

// TestLimitDisk checks that the writable tmpfs is sized by --disk, and that
// /tmp and /workspace share it: once /tmp is full, nothing more fits anywhere.
func TestLimitDisk(t *testing.T) {
	requireSandbox(t)
	r := sh(t, "df -k /tmp /workspace /home/sandbox | tail -n +2", "--disk", "4MiB")
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if f := strings.Fields(line); len(f) < 2 || f[1] != "4096" {
			t.Fatalf("df under --disk 4MiB: %q, want 4096 1K-blocks for every writable dir: the limit is not in force (stderr %q)", r.Stdout, r.Stderr)
		}
	}
	r = sh(t, `dd if=/dev/zero of=/tmp/big bs=1M count=8 2>&1; echo "dd=$?"; echo "size=$(stat -c %s /tmp/big)"; if echo x > /workspace/more; then echo workspace-written; fi`,
		"--disk", "4MiB")
	if !strings.Contains(r.Stdout, "No space left on device") {
		t.Errorf("writing 8 MiB under --disk 4MiB did not fail with ENOSPC: stdout %q stderr %q", r.Stdout, r.Stderr)
	}
	m := regexp.MustCompile(`size=(\d+)`).FindStringSubmatch(r.Stdout)
	if m == nil {
		t.Fatalf("no size reported: stdout %q stderr %q", r.Stdout, r.Stderr)
	}
	if n, _ := strconv.ParseInt(m[1], 10, 64); n > 4*spec.MiB {
		t.Errorf("/tmp/big grew to %d bytes, want at most %d", n, 4*spec.MiB)
	}
	if strings.Contains(r.Stdout, "workspace-written") {
		t.Errorf("/workspace took more data once /tmp had filled the --disk budget: stdout %q", r.Stdout)
	}
}

// TestLimitInodes checks that a flood of empty files, which uses no disk
// space, hits the tmpfs inode budget (disk/4KiB, at least 1024).
func TestLimitInodes(t *testing.T) {
	requireSandbox(t)
	r := sh(t, "df -i /tmp | tail -n +2", "--disk", "4MiB")
	if f := strings.Fields(r.Stdout); len(f) < 2 || f[1] != "1024" {
		t.Fatalf("df -i under --disk 4MiB: %q, want 1024 inodes: the limit is not in force (stderr %q)", r.Stdout, r.Stderr)
	}
	bomb := `
import errno
n = 0
try:
    while n < 100000:
        open("/tmp/f%d" % n, "w").close()
        n += 1
    print("created", n)
except OSError as e:
    print(errno.errorcode[e.errno], n)
`
	r = runJSON(t, "--disk", "4MiB", "--", "python3", "-c", bomb)
	m := regexp.MustCompile(`^(\w+) (\d+)\n$`).FindStringSubmatch(r.Stdout)
	if m == nil {
		t.Fatalf("inode flood: exit %d stdout %q stderr %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	n, _ := strconv.Atoi(m[2])
	if m[1] != "ENOSPC" || n >= 1100 {
		t.Errorf("inode flood ended with %s after %d files, want ENOSPC before 1100", m[1], n)
	}
}

// TestLimitPids checks that a process bomb under --pids 16 gets EAGAIN,
// starts at most 16 processes, and that the run still finishes.
func TestLimitPids(t *testing.T) {
	requireSandbox(t)
	got := liveCgroup(t, "--pids", "16")
	// Warden adds a few tasks of head-room for its own init.
	if got.pids < 16 || got.pids > 32 {
		t.Fatalf("sandbox cgroup pids.max is %d, want 16 plus the init's small head-room: the limit is not in force", got.pids)
	}
	bomb := `
import errno, os, signal
kids, failures, first = [], 0, ""
for i in range(64):
    try:
        pid = os.fork()
    except OSError as e:
        failures += 1
        first = first or errno.errorcode[e.errno]
        continue
    if pid == 0:
        try:
            os.execv("/bin/sleep", ["sleep", "5"])
        finally:
            os._exit(127)
    kids.append(pid)
print("started", len(kids), "failed", failures, first, flush=True)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
for pid in kids:
    os.waitpid(pid, 0)
print("done")
`
	r := runJSON(t, "--pids", "16", "--timeout", "30s", "--", "python3", "-c", bomb)
	m := regexp.MustCompile(`started (\d+) failed (\d+) (\w*)\ndone\n$`).FindStringSubmatch(r.Stdout)
	if r.ExitCode != 0 || r.TimedOut || m == nil {
		t.Fatalf("pid bomb did not finish cleanly: exit %d timed_out %v stdout %q stderr %q", r.ExitCode, r.TimedOut, r.Stdout, r.Stderr)
	}
	started, _ := strconv.Atoi(m[1])
	failed, _ := strconv.Atoi(m[2])
	if started > 16 || started < 1 || failed != 64-started || m[3] != "EAGAIN" {
		t.Errorf("started %d children, %d forks failed with %q; want 1..16 started and the rest failing with EAGAIN", started, failed, m[3])
	}
}

// TestLimitCPUs checks CPU bandwidth with two busy processes, each
// spinning until it has used one CPU second by its own clock or its wall
// budget is spent. This bounds CPU time consumed; it asserts nothing about
// how long anything took:
//   - with --cpus 0.5 and a 2 s wall budget, the CFS quota lets the cgroup
//     run at most 50 ms per 100 ms period, so the run cannot consume much
//     more than 1000 ms however fast, slow or busy the machine is (1300 ms
//     leaves slack for one period's overrun and python's start-up); without
//     the limit the same program would use about 2000 ms;
//   - with --cpus 0 the wall budget is a generous 10 s, so both spinners
//     reach their CPU second even on a loaded host, and the total must
//     exceed 1500 ms: the measurement counts both processes and nothing
//     else caps them.
func TestLimitCPUs(t *testing.T) {
	requireSandbox(t)
	spin := `
import os, sys, time
end = time.monotonic() + float(sys.argv[1])
kids = []
for i in range(2):
    pid = os.fork()
    if pid == 0:
        while time.process_time() < 1.0 and time.monotonic() < end:
            pass
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
`
	tests := []struct {
		cpus      string
		wall      string  // the spinners' wall budget, seconds
		wantCores float64 // 0: no quota
		check     func(ms float64) bool
		want      string
	}{
		{"0.5", "2", 0.5, func(ms float64) bool { return ms <= 1300 }, "<= 1300"},
		{"0", "10", 0, func(ms float64) bool { return ms > 1500 }, "> 1500"},
	}
	for _, tt := range tests {
		t.Run("cpus "+tt.cpus, func(t *testing.T) {
			if got := liveCgroup(t, "--cpus", tt.cpus); got.cpus != tt.wantCores {
				t.Fatalf("sandbox cgroup CPU quota is %v cores, want %v: the limit is not in force", got.cpus, tt.wantCores)
			}
			r := runJSON(t, "--cpus", tt.cpus, "--timeout", "30s", "--", "python3", "-c", spin, tt.wall)
			if r.ExitCode != 0 || r.TimedOut || r.Error != "" {
				t.Fatalf("spinners: exit %d timed_out %v error %q stderr %q", r.ExitCode, r.TimedOut, r.Error, r.Stderr)
			}
			if !tt.check(r.CPUTimeMS) {
				t.Errorf("two spinners under --cpus %s consumed cpu_time_ms %.0f, want %s", tt.cpus, r.CPUTimeMS, tt.want)
			}
		})
	}
}

// TestLimitCPUTime checks RLIMIT_CPU: a spinner is killed by the kernel
// after one CPU second, long before the wall-clock limit.
func TestLimitCPUTime(t *testing.T) {
	requireSandbox(t)
	if got := procLimit(t, "Max cpu time", "--cpu-time", "1s"); got != "1" {
		t.Fatalf("Max cpu time inside is %q, want 1: the limit is not in force", got)
	}
	// The spinner stops by itself after 10 s of wall time.
	spin := "import time\nend = time.time() + 10\nwhile time.time() < end: pass\nprint('survived')"
	r := runJSON(t, "--cpu-time", "1s", "--timeout", "30s", "--", "python3", "-c", spin)
	if r.TimedOut || strings.Contains(r.Stdout, "survived") {
		t.Fatalf("spinner was not stopped by --cpu-time: timed_out %v stdout %q", r.TimedOut, r.Stdout)
	}
	sigs := map[string]int{"SIGXCPU": int(syscall.SIGXCPU), "SIGKILL": int(syscall.SIGKILL)}
	if n, ok := sigs[r.Signal]; !ok || r.ExitCode != 128+n {
		t.Errorf("spinner ended with signal %q exit_code %d, want SIGXCPU (%d) or SIGKILL (%d)", r.Signal, r.ExitCode, 128+int(syscall.SIGXCPU), 128+int(syscall.SIGKILL))
	}
}

// TestLimitFileSize checks RLIMIT_FSIZE: writing past --file-size fails
// (SIGXFSZ kills dd, or the write gets EFBIG) and the file stops at the limit.
func TestLimitFileSize(t *testing.T) {
	requireSandbox(t)
	if got := procLimit(t, "Max file size", "--file-size", "1MiB"); got != "1048576" {
		t.Fatalf("Max file size inside is %q, want 1048576: the limit is not in force", got)
	}
	r := sh(t, `dd if=/dev/zero of=/tmp/big bs=64k count=32 2>&1; echo "dd=$?"; echo "size=$(stat -c %s /tmp/big)"`, "--file-size", "1MiB")
	m := regexp.MustCompile(`dd=(\d+)\nsize=(\d+)\n$`).FindStringSubmatch(r.Stdout)
	if m == nil {
		t.Fatalf("dd: exit %d stdout %q stderr %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	killed := m[1] == strconv.Itoa(128+int(syscall.SIGXFSZ))
	efbig := strings.Contains(r.Stdout, "File too large")
	if !killed && !efbig {
		t.Errorf("writing 2 MiB under --file-size 1MiB: dd status %s, output %q; want SIGXFSZ (%d) or EFBIG", m[1], r.Stdout, 128+int(syscall.SIGXFSZ))
	}
	if m[2] != "1048576" {
		t.Errorf("the file grew to %s bytes, want 1048576", m[2])
	}
}

// TestLimitOpenFiles checks RLIMIT_NOFILE: opening 100 files under
// --open-files 32 fails with EMFILE.
func TestLimitOpenFiles(t *testing.T) {
	requireSandbox(t)
	if got := procLimit(t, "Max open files", "--open-files", "32"); got != "32" {
		t.Fatalf("Max open files inside is %q, want 32: the limit is not in force", got)
	}
	bomb := `
import errno
held = []
try:
    for i in range(100):
        held.append(open("/dev/null"))
    print("opened", len(held))
except OSError as e:
    print(errno.errorcode[e.errno], len(held))
`
	r := runJSON(t, "--open-files", "32", "--", "python3", "-c", bomb)
	m := regexp.MustCompile(`^(\w+) (\d+)\n$`).FindStringSubmatch(r.Stdout)
	if m == nil {
		t.Fatalf("exit %d stdout %q stderr %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	if n, _ := strconv.Atoi(m[2]); m[1] != "EMFILE" || n >= 32 {
		t.Errorf("opening 100 files ended with %s after %d, want EMFILE before 32", m[1], n)
	}
}

// procLimit runs cat /proc/self/limits under flags and returns the soft
// value of the named limit as the program sees it.
func procLimit(t *testing.T, name string, flags ...string) string {
	t.Helper()
	r := runJSON(t, append(flags, "--", "cat", "/proc/self/limits")...)
	for _, line := range strings.Split(r.Stdout, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0]
			}
		}
	}
	t.Fatalf("no %q in /proc/self/limits: exit %d stdout %q stderr %q", name, r.ExitCode, r.Stdout, r.Stderr)
	return ""
}

// cgroupLimits are the limits found in a live sandbox's cgroup.
type cgroupLimits struct {
	memory int64   // bytes; -1 for none
	pids   int64   // -1 for none
	cpus   float64 // cores; 0 for no quota
}

// liveCgroup starts a sandbox under flags that waits on stdin, reads the
// limits from its cgroup (<own cgroup>/warden/<warden pid>-*), then lets it
// end. It proves a limit is in force before a test relies on it.
func liveCgroup(t *testing.T, flags ...string) cgroupLimits {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append(append([]string{"run"}, flags...), "--", "sh", "-c", "echo ready; read x")
	cmd := exec.CommandContext(ctx, wardenBin, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("sandbox under %q did not start: %q %v, stderr %q", flags, line, err, stderr.String())
	}
	prefix := strconv.Itoa(cmd.Process.Pid) + "-"
	// read finds file in the sandbox's cgroup, in whichever hierarchy has it.
	read := func(file string) string {
		for _, parent := range cgroup.Parents() {
			dirs, _ := filepath.Glob(filepath.Join(parent, prefix+"*"))
			if len(dirs) != 1 {
				t.Fatalf("want one cgroup %s* for the sandbox in %s, found %q", prefix, parent, dirs)
			}
			b, err := os.ReadFile(filepath.Join(dirs[0], file))
			if err == nil {
				return strings.TrimSpace(string(b))
			}
		}
		t.Fatalf("no cgroup of the sandbox has %s", file)
		return ""
	}
	num := func(s string) int64 {
		if s == "max" {
			return -1
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("cgroup value %q: %v", s, err)
		}
		if n >= 1<<62 { // v1's "unlimited" is a page-rounded MaxInt64
			return -1
		}
		return n
	}
	var l cgroupLimits
	if cgroup.Probe().Version == "v2" {
		l.memory = num(read("memory.max"))
		l.pids = num(read("pids.max"))
		f := strings.Fields(read("cpu.max"))
		if len(f) == 2 && f[0] != "max" {
			l.cpus = float64(num(f[0])) / float64(num(f[1]))
		}
		return l
	}
	l.memory = num(read("memory.limit_in_bytes"))
	l.pids = num(read("pids.max"))
	if q := num(read("cpu.cfs_quota_us")); q > 0 {
		l.cpus = float64(q) / float64(num(read("cpu.cfs_period_us")))
	}
	return l
}

// TestLimitMemoryCountsSocketBuffers is the attack of a program that
// queues data in loopback TCP connections nobody reads: kernel socket
// buffers belong to no process, and unless the memory limit counts them
// a 64 MiB sandbox could pin gigabytes of host memory. The program stops
// by itself at 400 MiB or when every send would block.
func TestLimitMemoryCountsSocketBuffers(t *testing.T) {
	requireSandbox(t)
	script := `
import socket
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(512)
port = srv.getsockname()[1]
total, conns, chunk = 0, [], b"x" * 65536
for i in range(100):
    c = socket.create_connection(("127.0.0.1", port)); s, _ = srv.accept()
    c.setblocking(False); conns.append((c, s))
    while total < 400 << 20:
        try:
            total += c.send(chunk)
        except OSError:
            break
    if total >= 400 << 20:
        break
print(total >> 20)
`
	r := runJSON(t, "--memory", "64MiB", "--timeout", "30s", "--", "python3", "-c", script)
	queued, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
	if r.Error != "" || err != nil {
		t.Fatalf("exit %d stdout %q stderr %q error %q", r.ExitCode, r.Stdout, r.Stderr, r.Error)
	}
	if queued > 128 {
		t.Errorf("a --memory 64MiB sandbox queued %d MiB in socket buffers, want at most about the limit", queued)
	}
}
