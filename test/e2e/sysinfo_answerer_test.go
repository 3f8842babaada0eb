package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// sysinfoSignalPy calls sysinfo(2) up to 20 000 times while a second
// thread floods the calling thread with SIGUSR1 (a handler without
// SA_RESTART, Python's default, so an interrupted call returns EINTR),
// until 400 calls returned EINTR. After each EINTR it waits 3 ms and
// checks whether the struct, filled with 0xAA before the call, was
// written: the call has returned, so nothing may write it any more. It
// prints the calls, the EINTR returns, those whose struct was written and
// the other failures.
const sysinfoSignalPy = `import ctypes as c, signal, threading, time
libc = c.CDLL(None, use_errno=True)
signal.signal(signal.SIGUSR1, lambda *a: None)
buf = (c.c_char * 112)()
done = threading.Event()
main = threading.main_thread().ident
def flood():
    k = 0
    while not done.is_set() and k < 2000000:
        signal.pthread_kill(main, signal.SIGUSR1); k += 1
threading.Thread(target=flood).start()
calls = eintr = written = other = 0
while calls < 20000 and eintr < 400:
    c.memset(buf, 0xAA, 112)
    calls += 1
    if libc.sysinfo(buf) == 0:
        continue
    if c.get_errno() != 4:
        other += 1
        continue
    eintr += 1
    time.sleep(0.003)
    if buf.raw != b"\xaa" * 112:
        written += 1
done.set()
print(calls, eintr, written, other)`

// TestSysinfoSignalFlood checks, on each backend whose init answers
// sysinfo(2), that a call a signal interrupts has returned for good: the
// init never writes its answer into a caller's memory after the call
// returned EINTR (Linux 5.19's SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
// keeps a call the init has read waiting for its answer). A signal that
// arrives before the init reads the call still interrupts it, as seccomp
// user notification does by design; the EINTR returns are logged.
func TestSysinfoSignalFlood(t *testing.T) {
	if !kernelAtLeast(t, 5, 19) {
		t.Skip("the kernel predates SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (5.19): the late write is a documented race there")
	}
	for _, b := range conformanceBackends(t) {
		if b == "gvisor" || b == "microvm" {
			continue // its kernel answers the call
		}
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			r := runJSON(t, "--backend", b, "--", "python3", "-c", sysinfoSignalPy)
			f := strings.Fields(r.Stdout)
			if r.ExitCode != 0 || len(f) != 4 {
				t.Fatalf("signal flood: exit %d, stdout %q, stderr %q, error %q", r.ExitCode, r.Stdout, r.Stderr, r.Error)
			}
			if f[2] != "0" || f[3] != "0" {
				t.Errorf("signal flood: %s calls, %s EINTR, %s of them written after returning, %s other failures; want none written and no other failure", f[0], f[1], f[2], f[3])
			}
			t.Logf("calls %s, EINTR %s, written after EINTR %s", f[0], f[1], f[2])
		})
	}
}

// kernelAtLeast says whether the running kernel is major.minor or later.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatalf("uname: %v", err)
	}
	var maj, min int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &maj, &min); err != nil {
		t.Fatalf("parsing the kernel release %q: %v", unix.ByteSliceToString(u.Release[:]), err)
	}
	return maj > major || maj == major && min >= minor
}

// TestSysinfoAnswererPrivileges checks from the host the one init thread
// whose file identity is the sandbox user's, the sysinfo answerer, which
// reads what the sandbox sends: it has no capability, effective or
// permitted, no supplementary group, and its real uid is not the sandbox
// user's, so no sandbox process may signal or ptrace it; on native and
// Docker boxes.
func TestSysinfoAnswererPrivileges(t *testing.T) {
	for _, b := range conformanceBackends(t) {
		if b == "gvisor" || b == "microvm" {
			continue // its kernel answers the call
		}
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			answererPrivileges(t, startServer(t, "--backend", b))
		})
	}
}

func answererPrivileges(t *testing.T, srv *apiServer) {
	id := srv.newSession(t, keyA, nil)
	pid := srv.sessionInitPid(t, id)
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/root/workspace/.marker", pid), &st); err != nil {
		t.Fatal(err)
	}
	user := strconv.FormatUint(uint64(st.Uid), 10)
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The sandbox user's fsuid marks the answerer and the thread that
	// forks the program, which keeps SETUID, SETGID and KILL (0xe0).
	var answerers []map[string]string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // a thread that ended
		}
		s := statusFields(string(b))
		ids := strings.Fields(s["Uid"])
		switch {
		case len(ids) != 4 || ids[3] != user:
		case s["CapEff"] == forkerCaps && s["CapPrm"] == forkerCaps:
		default:
			answerers = append(answerers, s)
		}
	}
	if len(answerers) != 1 {
		t.Fatalf("%d of the init's %d threads have the sandbox user %s as fsuid and not the forking thread's capabilities, want 1 (the sysinfo answerer)", len(answerers), len(paths), user)
	}
	s := answerers[0]
	for _, k := range []string{"CapEff", "CapPrm"} {
		if s[k] != "0000000000000000" {
			t.Errorf("answerer %s = %s, want 0000000000000000", k, s[k])
		}
	}
	if g := s["Groups"]; g != "" {
		t.Errorf("answerer Groups = %q, want none", g)
	}
	if ruid := strings.Fields(s["Uid"])[0]; ruid == user {
		t.Errorf("answerer real uid = %s, the sandbox user's; want the init's", ruid)
	}
}

// forkerCaps are the capabilities of the init's thread that forks the
// program (nsinit's keptCaps: SETGID, SETUID, KILL), as /proc shows them.
const forkerCaps = "00000000000000e0"

// statusFields parses a /proc status file into its fields.
func statusFields(status string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// sysinfoProtPy calls sysinfo(2) at a page mapped PROT_READ, at one
// mapped PROT_NONE, at the last 100 bytes of a writable page followed by
// a read-only one, and at a writable page, and prints each errno (0 for
// success).
const sysinfoProtPy = `import ctypes as c, mmap
libc = c.CDLL(None, use_errno=True)
libc.mmap.restype = c.c_void_p
libc.mmap.argtypes = [c.c_void_p, c.c_size_t, c.c_int, c.c_int, c.c_int, c.c_long]
libc.mprotect.argtypes = [c.c_void_p, c.c_size_t, c.c_int]
anon = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
def call(p):
    c.set_errno(0)
    return 0 if libc.sysinfo(c.c_void_p(p)) == 0 else c.get_errno()
ro = libc.mmap(None, 4096, mmap.PROT_READ, anon, -1, 0)
none = libc.mmap(None, 4096, 0, anon, -1, 0)
two = libc.mmap(None, 8192, mmap.PROT_READ | mmap.PROT_WRITE, anon, -1, 0)
libc.mprotect(two + 4096, 4096, mmap.PROT_READ)
print(call(ro), call(none), call(two + 4096 - 100), call(two))`

// TestSysinfoProtection checks that the init, which writes through the
// caller's /proc/TID/mem (and so through page protections), answers as
// the kernel does: EFAULT (14) for a read-only page, a PROT_NONE page and
// a struct that runs from a writable page into a read-only one, and 0 for
// a writable page.
func TestSysinfoProtection(t *testing.T) {
	for _, b := range conformanceBackends(t) {
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			r := runJSON(t, "--backend", b, "--", "python3", "-c", sysinfoProtPy)
			if got := strings.TrimSpace(r.Stdout); r.ExitCode != 0 || got != "14 14 14 0" {
				t.Errorf("sysinfo at read-only, PROT_NONE, straddling and writable pages: exit %d, errnos %q, stderr %q; want \"14 14 14 0\"", r.ExitCode, got, r.Stderr)
			}
		})
	}
}
