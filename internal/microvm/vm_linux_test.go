package microvm

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestStartBadKernel shows a VM that cannot boot fails Start with one
// line carrying QEMU's own complaint, and leaves no QEMU behind.
func TestStartBadKernel(t *testing.T) {
	needQEMU(t)
	k := filepath.Join(t.TempDir(), "vmlinux")
	if err := os.WriteFile(k, []byte("\x1b[2Jnot a kernel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vm, err := Start(context.Background(), Config{Kernel: k, Initrd: []byte("junk")})
	if err == nil {
		vm.Kill()
		t.Fatal("a VM with a junk kernel started")
	}
	msg := err.Error()
	t.Logf("Start: %s", msg)
	if !strings.Contains(msg, "QEMU ended before the guest's hello") || !strings.Contains(msg, "console:") || strings.ContainsAny(msg, "\n\x1b") {
		t.Errorf("Start error = %q, want one line with the hello failure and the console", msg)
	}
}

func TestStartRefusesPrivateKernel(t *testing.T) {
	needQEMU(t)
	k := filepath.Join(t.TempDir(), "vmlinux")
	if err := os.WriteFile(k, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Config{Kernel: k, Initrd: []byte("x")})
	if err == nil || !strings.Contains(err.Error(), "chmod o+r") {
		t.Errorf("Start with a 0600 kernel = %v, want told to make it readable", err)
	}
}

// TestBoot boots the real guest init, checks QEMU's confinement while it
// runs, then closes it.
func TestBoot(t *testing.T) {
	needQEMU(t)
	cfg, kernel := guestConfig(t)
	vm, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot %+v, accel %+v", vm.Boot(), vm.Accel())
	checkConfined(t, vm)
	checkRoot(t, vm, kernel, nil)
	checkCgroup(t, vm)
	closeVM(t, vm)
	if _, err := os.Stat(vm.cg.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("QEMU's cgroup %s after Close: %v, want removed", vm.cg.Path(), err)
	}
}

// TestKill shows Kill ends QEMU's whole process group.
func TestKill(t *testing.T) {
	needQEMU(t)
	vm, err := Start(context.Background(), testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	pid := vm.Pid()
	vm.Kill()
	var ee interface{ ExitCode() int }
	if err := vm.Wait(); !errors.As(err, &ee) || ee.ExitCode() != -1 {
		t.Errorf("Wait after Kill = %v, want killed by a signal", err)
	}
	if err := unix.Kill(-pid, 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("process group %d after Kill: %v, want ESRCH (none left)", pid, err)
	}
	vm.Kill() // after the exit: signals nothing
}

// checkConfined reads /proc/<pid> of a running QEMU: its own leased uid
// and gid, no capabilities or groups, pid 1 of its own PID namespace, no
// environment, and only the descriptors the launcher gave it besides
// those QEMU made itself.
func checkConfined(t *testing.T, vm *VM) {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(vm.Pid())
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		t.Fatal(err)
	}
	id := strconv.Itoa(vm.id.ID())
	for _, want := range []string{
		"Uid:\t" + strings.Repeat(id+"\t", 3) + id + "\n", "Gid:\t" + strings.Repeat(id+"\t", 3) + id + "\n",
		"Groups:\t" + wantGroups(t, vm) + "\n", "NSpid:\t" + strconv.Itoa(vm.Pid()) + "\t1\n",
		"CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapAmb:\t0000000000000000",
		"NoNewPrivs:\t1", "Seccomp:\t2",
	} {
		if !strings.Contains(string(status), want) {
			t.Errorf("QEMU's status lacks %q:\n%s", want, status)
		}
	}
	if env, err := os.ReadFile(dir + "/environ"); err != nil || len(env) != 0 {
		t.Errorf("QEMU's environment = %q, %v; want empty", env, err)
	}
	checkFDs(t, dir)
}

// checkFDs: 0-3 are what the launcher passed; every other descriptor is
// one QEMU makes itself (eventfds, a signalfd, /dev/null, its firmware,
// the guest kernel and initrd in its own root), never a pipe, socket or
// host file this process leaked to it.
func checkFDs(t *testing.T, dir string) {
	t.Helper()
	want := map[string]string{"0": "/dev/null", "1": "pipe:", "2": "pipe:", "3": "socket:"}
	ents, err := os.ReadDir(dir + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range ents {
		link, err := os.Readlink(dir + "/fd/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, e.Name()+"="+link)
		if w, ok := want[e.Name()]; ok {
			if !strings.HasPrefix(link, w) {
				t.Errorf("QEMU's fd %s is %s, want %s", e.Name(), link, w)
			}
			continue
		}
		if !ownFD(link) {
			t.Errorf("QEMU holds fd %s on %s, which is not one QEMU makes itself: leaked by the launcher?", e.Name(), link)
		}
	}
	t.Logf("QEMU's descriptors: %s", strings.Join(seen, " "))
}

// TestPortEcho: asked to echo (Boot.Echo), the guest's init echoes the
// port, which proves bytes cross both ways after the hello.
func TestPortEcho(t *testing.T) {
	needQEMU(t)
	vm, err := Start(context.Background(), testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeVM(t, vm)
	askEcho(t, vm)
	msg := []byte("ping over virtio-serial")
	if _, err := vm.Stream().Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(vm.Stream(), got); err != nil || string(got) != string(msg) {
		t.Errorf("echo = %q, %v; want %q", got, err, msg)
	}
}

// closeVM closes a VM and fails t unless it ended (by the guest or by
// Close's kill) without QEMU failing.
func closeVM(t testing.TB, vm *VM) {
	t.Helper()
	if err := vm.Close(); err != nil {
		t.Errorf("Close = %v, want QEMU ended by the guest or by Close's kill; console: %q", err, vm.Console())
	}
}

// ownFD reports whether a descriptor's link is one QEMU opens itself.
func ownFD(link string) bool {
	return strings.HasPrefix(link, "anon_inode:") || link == "/dev/null" || link == "/dev/urandom" || strings.HasPrefix(link, "/usr/share/qemu/") ||
		link == guestKernel || link == guestInitrd
}

// TestBootTimeout shows a guest that does not say hello in time is killed
// and Start says so in one line: the wait is bounded by BootTimeout.
func TestBootTimeout(t *testing.T) {
	needQEMU(t)
	cfg := testConfig(t)
	cfg.BootTimeout = time.Nanosecond
	_, err := Start(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "no valid hello from the guest within 1ns") || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Start with a 1 ns boot timeout = %v, want a deadline error", err)
	}
}

// TestContextKills: cancelling Start's context ends the VM.
func TestContextKills(t *testing.T) {
	needQEMU(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	vm, err := Start(ctx, testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	var ee interface{ ExitCode() int }
	if err := vm.Wait(); !errors.As(err, &ee) || ee.ExitCode() != -1 {
		t.Errorf("Wait after the context ended = %v, want killed by a signal", err)
	}
	if err := vm.Stream().Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("closing the port after QEMU ended = %v, want already closed by the VM's teardown", err)
	}
}

// TestFailedStartsLeakNoFDs: a Start that fails after QEMU ran (a junk
// kernel, no hello) leaves this process no descriptor behind: not the
// console pipe, not the agent socket.
func TestFailedStartsLeakNoFDs(t *testing.T) {
	needQEMU(t)
	k := filepath.Join(t.TempDir(), "vmlinux")
	if err := os.WriteFile(k, []byte("not a kernel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func() {
		if vm, err := Start(context.Background(), Config{Kernel: k, Initrd: []byte("junk")}); err == nil {
			vm.Kill()
			t.Fatal("a VM with a junk kernel started")
		}
	}
	start() // the first Start opens what the process keeps (the accel choice)
	before := countFDs(t)
	for range 5 {
		start()
	}
	if got := countFDs(t); got != before {
		t.Errorf("descriptors after 5 failed Starts = %d, want %d as before", got, before)
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// wantGroups is QEMU's Groups line in /proc/<pid>/status: none, or under
// KVM /dev/kvm's group alone.
func wantGroups(t *testing.T, vm *VM) string {
	t.Helper()
	if vm.Accel().Accel != KVM {
		return " "
	}
	var st unix.Stat_t
	if err := unix.Stat("/dev/kvm", &st); err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(int(st.Gid)) + " "
}

// TestVMsApart: two VMs' QEMUs run under different uids, so a QEMU taken
// over by its guest (played by a shell under VM A's uid) can neither read
// VM B's memory nor signal B. The shell only opens and sends signal 0.
func TestVMsApart(t *testing.T) {
	needQEMU(t)
	testhost.RequireTool(t, "sh")
	cfg := testConfig(t)
	a, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeVM(t, a)
	b, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeVM(t, b)
	if a.id.ID() == b.id.ID() {
		t.Fatalf("both QEMUs run as uid %d, want one each", a.id.ID())
	}
	script := `(exec 3</proc/$1/mem) 2>/dev/null && echo read-mem; kill -0 $1 2>/dev/null && echo signalled; echo ran`
	cmd := exec.Command("/bin/sh", "-c", script, "sh", strconv.Itoa(b.Pid()))
	uid := uint32(a.id.ID())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	out, err := cmd.Output()
	if got := strings.TrimSpace(string(out)); err != nil || got != "ran" {
		t.Errorf("a shell as VM A's QEMU against VM B's QEMU printed %q (%v), want only \"ran\": it reached B", got, err)
	}
}

// checkCgroup: QEMU runs in its own cgroup, whose memory limit covers the
// guest, the translation cache and QEMU's headroom.
func checkCgroup(t *testing.T, vm *VM) {
	t.Helper()
	dir := vm.cg.Path()
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(procs)); len(got) != 1 || got[0] != strconv.Itoa(vm.Pid()) {
		t.Errorf("processes in QEMU's cgroup %s = %q, want QEMU's pid %d alone", dir, got, vm.Pid())
	}
	want := strconv.FormatInt(limits(Config{MemoryMiB: DefaultMemoryMiB, CPUs: 1}, vm.Accel().Accel).MemoryBytes, 10)
	limit, err := os.ReadFile(filepath.Join(dir, "memory.limit_in_bytes")) // v1
	if errors.Is(err, os.ErrNotExist) {
		limit, err = os.ReadFile(filepath.Join(dir, "memory.max")) // v2
	}
	if got := strings.TrimSpace(string(limit)); err != nil || got != want {
		t.Errorf("QEMU's cgroup memory limit = %q, %v; want %s", got, err, want)
	}
}

// init keeps the main thread to the main goroutine, so no test goroutine
// runs there: TestStartThreadEnds needs its goroutine's thread to end when
// it exits locked, which the runtime does to every thread but the main one.
func init() { runtime.LockOSThread() }

// TestStartThreadEnds: QEMU outlives the thread of the goroutine that
// called Start (Pdeathsig follows the forking thread): Start from a
// goroutine locked to its thread that ends locked, which kills the thread,
// then the VM still echoes.
func TestStartThreadEnds(t *testing.T) {
	needQEMU(t)
	cfg := testConfig(t)
	type started struct {
		vm  *VM
		err error
		tid int
	}
	ch := make(chan started, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		vm, err := Start(context.Background(), cfg)
		ch <- started{vm, err, unix.Gettid()}
	}()
	s := <-ch
	if s.tid == unix.Getpid() {
		t.Fatal("Start ran on the main thread, which init keeps for the main goroutine")
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	defer closeVM(t, s.vm)
	askEcho(t, s.vm)
	for i := 0; ; i++ { // bounded: the runtime ends the thread at once
		if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(s.tid)); errors.Is(err, os.ErrNotExist) {
			break
		}
		if i == 1000 {
			t.Fatalf("thread %d still runs", s.tid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := s.vm.Stream().Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s.vm.Stream(), make([]byte, 1)); err != nil {
		t.Errorf("echo after Start's thread ended: %v, want QEMU alive", err)
	}
}

// firstChildEnv names the initrd file a test binary started by
// TestStartFirstChild boots, its QEMU being the process's first child.
const firstChildEnv = "WARDEN_TEST_FIRST_CHILD_INITRD"

// TestStartFirstChild: Start works when QEMU is the process's first child,
// so Go's one-time pidfd probe (which forks a child of its own) has not
// run before: a fresh test binary starts one VM and closes it.
func TestStartFirstChild(t *testing.T) {
	needQEMU(t)
	if initrd := os.Getenv(firstChildEnv); initrd != "" {
		startFirstChild(t, initrd)
		return
	}
	cfg := testConfig(t)
	initrd := filepath.Join(t.TempDir(), "initrd")
	if err := os.WriteFile(initrd, cfg.Initrd, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStartFirstChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), firstChildEnv+"="+initrd)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("a fresh process starting a VM as its first child: %v\n%s", err, out)
	}
}

// startFirstChild is TestStartFirstChild in the fresh process: nothing
// here forks before Start.
func startFirstChild(t *testing.T, initrd string) {
	k, args, err := GuestKernel(HostAccel().Accel)
	if err != nil {
		t.Fatal(err)
	}
	f, err := k.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := os.ReadFile(initrd)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := Start(context.Background(), Config{KernelFile: f, KernelArgs: args, Initrd: b})
	if err != nil {
		t.Fatal(err)
	}
	closeVM(t, vm)
}

// TestStartStopped: QEMU started stopped (-S), moved into its cgroup and
// continued over QMP, as on a cgroup v2 host (taken here whatever the
// host's cgroups), boots and echoes.
func TestStartStopped(t *testing.T) {
	needQEMU(t)
	cfg := testConfig(t)
	saved := startStopped
	t.Cleanup(func() { startStopped = saved })
	startStopped = func(cgroup.Placement) bool { return true }
	vm, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeVM(t, vm)
	askEcho(t, vm)
	if _, err := vm.Stream().Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(vm.Stream(), make([]byte, 1)); err != nil {
		t.Errorf("echo from a VM continued over QMP: %v", err)
	}
}

// TestStartFailsClosed: on cgroup v1, when QEMU's thread cannot rejoin
// warden's cgroup after the fork (here its tasks file is opened
// read-only), QEMU is killed and reaped, and start's error says so: no
// QEMU is left in its cgroup, which start removes.
func TestStartFailsClosed(t *testing.T) {
	needQEMU(t)
	cfg, err := testConfig(t).normalize()
	if err != nil {
		t.Fatal(err)
	}
	l, err := prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := l.cg.Path()
	if len(l.ownTasks) == 0 {
		l.closeFiles()
		l.closeHostEnds()
		t.Skip("QEMU's thread joins no cgroup on this host (cgroup v2)")
	}
	ro, err := os.Open(l.ownTasks[0].Name())
	if err != nil {
		t.Fatal(err)
	}
	closeLogged(l.ownTasks[0], "tasks file")
	l.ownTasks[0] = ro
	vm, err := l.start()
	l.closeFiles()
	if err == nil {
		closeVM(t, vm)
		t.Fatal("start with an unwritable return tasks file started QEMU")
	}
	if !strings.Contains(err.Error(), "QEMU was stopped") {
		t.Errorf("start = %v, want an error saying QEMU was stopped", err)
	}
	// start removed the cgroup, which fails while a process is left in it.
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("QEMU's cgroup %s after a failed start: %v, want removed (no QEMU left in it)", dir, err)
	}
}
