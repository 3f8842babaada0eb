package seccomp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// childEnv selects what a re-executed test binary does instead of running
// tests: "probe" installs the filter and tries syscalls; the other modes run
// in a grandchild started by the probe, under the inherited filter.
const childEnv = "WARDEN_SECCOMP_TEST_CHILD"

// dirEnv names a scratch directory, owned by the parent test, in which the
// probe creates files.
const dirEnv = "WARDEN_SECCOMP_TEST_DIR"

func TestMain(m *testing.M) {
	switch mode := os.Getenv(childEnv); mode {
	case "":
		os.Exit(m.Run())
	case "probe":
		probe()
	case "inherited":
		probeInherited()
	case "x32":
		probeX32()
	case "noop":
	default:
		fmt.Printf("mode=unknown %q\n", mode)
	}
	os.Exit(0)
}

// TestInstallOnThread installs the real filter in a child process and checks
// what the kernel answers. Every probe is harmless if the filter were
// missing: invalid fds, throwaway sockets that are closed at once, files in
// a temporary directory.
func TestInstallOnThread(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("filter is for amd64, not %s", runtime.GOARCH)
	}
	t.Setenv(dirEnv, t.TempDir())
	out, err := runChild(t.Context(), "probe", nil)
	if err != nil {
		t.Fatalf("running probe child: %v\n%s", err, out)
	}
	got := parseResults(out)
	if got["install"] != "ok" {
		testhost.SkipOrFail(t, fmt.Sprintf("installing the filter in the child: %s", got["install"]))
	}
	want := map[string]string{
		"install":                           "ok",
		"getpid":                            "ok",
		"unshare(CLONE_NEWUSER)":            "EPERM",
		"socket(AF_PACKET)":                 "EPERM",
		"socket(AF_NETLINK, NETLINK_AUDIT)": "EPERM",
		"socket(AF_NETLINK, NETLINK_ROUTE)": "ok",
		"socket(AF_INET)":                   "ok",
		"ioctl(-1, TCGETS)":                 "EBADF",
		"ioctl(-1, TIOCSTI)":                "EPERM",
		"ioctl(-1, 0xFFFFFFFF00005412)":     "EPERM",
		"ioctl(-1, TIOCLINUX)":              "EPERM",
		"fcntl(-1, F_GETLEASE)":             "EBADF",
		"fcntl(-1, F_SETLEASE)":             "EPERM",
		"clone3":                            "ENOSYS",
		"bpf":                               "EPERM",
		"io_uring_setup":                    "EPERM",
		"openat(O_CREAT, 04755)":            "EPERM",
		"openat(O_CREAT, 0644)":             "ok",
		"fchmod(04755)":                     "EPERM",
		"fchmod(0600)":                      "ok",
		"chmod(02755)":                      "EPERM",
		"mknodat(S_IFREG|04644)":            "EPERM",
		"openat2":                           "ENOSYS",
		"modify_ldt":                        "EPERM",
		"socket(AF_INET, IPPROTO_TCP)":      "ok",
		"socket(AF_INET, IPPROTO_SCTP)":     "EPERM",
		"socket(AF_INET6, IPPROTO_UDPLITE)": "EPERM",
		"socketpair(AF_INET, IPPROTO_SCTP)": "EPERM",
		"personality(query)":                "ok",
		"personality(PER_LINUX32)":          "ok",
		"personality(ADDR_NO_RANDOMIZE)":    "EPERM",
		"prlimit64(0, set)":                 "ok",
		"prlimit64(getpid(), get)":          "ok",
		"prlimit64(getpid(), set)":          "EPERM",
		"prlimit64(getppid(), set)":         "EPERM",
		"prlimit64(getppid(), set 1<<63)":   "EPERM",
		"exec":                              "ok",
		"child.seccomp":                     "2",
		"child.unshare(CLONE_NEWUSER)":      "EPERM",
		"exec(CLONE_NEWUSER)":               "EPERM",
		"x32":                               "killed by SIGSYS",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("probe results mismatch (-want +got):\n%s\nchild output:\n%s", diff, out)
	}
}

// runChild re-executes the test binary in the given mode and returns its
// standard output.
func runChild(ctx context.Context, mode string, attr *syscall.SysProcAttr) ([]byte, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding test binary: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	cmd.SysProcAttr = attr
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("running %s child: %w (stderr: %s)", mode, err, stderr.Bytes())
	}
	return out, nil
}

// parseResults reads "name=value" lines.
func parseResults(out []byte) map[string]string {
	got := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if name, value, ok := strings.Cut(sc.Text(), "="); ok {
			got[name] = value
		}
	}
	return got
}

// report prints one probe result for the parent.
func report(name string, err error) {
	var errno unix.Errno
	switch {
	case err == nil:
		fmt.Printf("%s=ok\n", name)
	case errors.As(err, &errno):
		fmt.Printf("%s=%s\n", name, unix.ErrnoName(errno))
	default:
		fmt.Printf("%s=%v\n", name, err)
	}
}

// rawSys makes a raw syscall on this thread and returns its errno, closing any
// fd it created.
func rawSys(trap, a1, a2, a3 uintptr, isFD bool) error {
	r, _, e := unix.Syscall(trap, a1, a2, a3)
	if e != 0 {
		return e
	}
	if isFD {
		unix.Close(int(r))
	}
	return nil
}

// probe runs in the child: it confines its own thread and probes from it.
func probe() {
	runtime.LockOSThread() // never unlocked: the thread dies with the process
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		report("install", fmt.Errorf("setting no_new_privs: %w", err))
		return
	}
	if err := InstallOnThread(); err != nil {
		report("install", err)
		return
	}
	report("install", nil)

	const invalidFD = ^uintptr(0) // -1
	report("getpid", rawSys(unix.SYS_GETPID, 0, 0, 0, false))
	report("unshare(CLONE_NEWUSER)", rawSys(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0, false))
	report("socket(AF_PACKET)", rawSys(unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0, true))
	report("socket(AF_NETLINK, NETLINK_AUDIT)", rawSys(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT, true))
	report("socket(AF_NETLINK, NETLINK_ROUTE)", rawSys(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE, true))
	report("socket(AF_INET)", rawSys(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0, true))
	report("ioctl(-1, TCGETS)", rawSys(unix.SYS_IOCTL, invalidFD, unix.TCGETS, 0, false))
	report("ioctl(-1, TIOCSTI)", rawSys(unix.SYS_IOCTL, invalidFD, unix.TIOCSTI, 0, false))
	report("ioctl(-1, 0xFFFFFFFF00005412)", rawSys(unix.SYS_IOCTL, invalidFD, 0xFFFFFFFF_00000000|unix.TIOCSTI, 0, false))
	report("ioctl(-1, TIOCLINUX)", rawSys(unix.SYS_IOCTL, invalidFD, unix.TIOCLINUX, 0, false))
	report("fcntl(-1, F_GETLEASE)", rawSys(unix.SYS_FCNTL, invalidFD, unix.F_GETLEASE, 0, false))
	report("fcntl(-1, F_SETLEASE)", rawSys(unix.SYS_FCNTL, invalidFD, unix.F_SETLEASE, unix.F_WRLCK, false))
	report("clone3", rawSys(unix.SYS_CLONE3, 0, 0, 0, false)) // NULL args: EFAULT/EINVAL if it got through
	report("bpf", rawSys(unix.SYS_BPF, invalidFD, 0, 0, false))
	report("io_uring_setup", rawSys(unix.SYS_IO_URING_SETUP, 0, 0, 0, false))
	report("modify_ldt", rawSys(unix.SYS_MODIFY_LDT, 0, 0, 0, false)) // read 0 bytes of LDT if it got through
	probeSockets()
	probePersonality()
	probePrlimit()
	probeSetID(os.Getenv(dirEnv))

	// Go's os/exec forks (clone with CLONE_VFORK|CLONE_VM|CLONE_PIDFD) and
	// execs from this locked thread, so the grandchild inherits the filter.
	out, err := runChild(context.Background(), "inherited", nil)
	report("exec", err)
	os.Stdout.Write(out)

	// A namespaced child is refused at clone; if it were not, the child
	// would only exit.
	_, err = runChild(context.Background(), "noop", &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER})
	report("exec(CLONE_NEWUSER)", unwrapErrno(err))

	// An x32 syscall must kill the process that makes it.
	_, err = runChild(context.Background(), "x32", nil)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			fmt.Printf("x32=killed by %s\n", unix.SignalName(ws.Signal()))
			return
		}
	}
	report("x32", err)
}

// badSockType is past SOCK_MAX: a socket call the filter lets through
// fails with EINVAL before the kernel looks for the protocol, so probing a
// refused protocol never loads its module even if the filter were missing.
const badSockType = 15

// probeSockets tries AF_INET and AF_INET6 protocols from the filtered thread.
func probeSockets() {
	report("socket(AF_INET, IPPROTO_TCP)", rawSys(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP, true))
	report("socket(AF_INET, IPPROTO_SCTP)", rawSys(unix.SYS_SOCKET, unix.AF_INET, badSockType, unix.IPPROTO_SCTP, true))
	report("socket(AF_INET6, IPPROTO_UDPLITE)", rawSys(unix.SYS_SOCKET, unix.AF_INET6, badSockType, unix.IPPROTO_UDPLITE, true))
	var fds [2]int32
	_, _, e := unix.RawSyscall6(unix.SYS_SOCKETPAIR, unix.AF_INET, badSockType, unix.IPPROTO_SCTP, uintptr(unsafe.Pointer(&fds)), 0, 0)
	report("socketpair(AF_INET, IPPROTO_SCTP)", errnoErr(e))
}

// probePersonality queries the persona, then sets an allowed and a refused
// one, each time restoring the old persona (the grandchildren exec'd later
// inherit it). personality itself never fails, so an error is the filter's.
func probePersonality() {
	const (
		perLinux32      = 0x0008
		addrNoRandomize = 0x0040000
	)
	setPersona := func(p uintptr) error {
		old, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, p, 0, 0)
		if e != 0 {
			return e
		}
		if _, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, old, 0, 0); e != 0 {
			return fmt.Errorf("restoring persona %#x: %w", old, e)
		}
		return nil
	}
	report("personality(query)", rawSys(unix.SYS_PERSONALITY, 0xFFFFFFFF, 0, 0, false))
	report("personality(PER_LINUX32)", setPersona(perLinux32))
	report("personality(ADDR_NO_RANDOMIZE)", setPersona(addrNoRandomize))
}

// probePrlimit changes its own RLIMIT_NOFILE to what it already is through
// pid 0, which must work, and tries to change the parent test process's
// through an invalid pointer, so that a call the filter let through would
// fail with EFAULT before touching any limit.
func probePrlimit() {
	prlimit := func(pid int, newLim, old uintptr) error {
		_, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, uintptr(pid), unix.RLIMIT_NOFILE, newLim, old, 0, 0)
		return errnoErr(e)
	}
	var cur unix.Rlimit
	if err := prlimit(0, 0, uintptr(unsafe.Pointer(&cur))); err != nil {
		report("prlimit64(0, set)", fmt.Errorf("getting RLIMIT_NOFILE: %w", err))
	} else {
		report("prlimit64(0, set)", prlimit(0, uintptr(unsafe.Pointer(&cur)), 0))
	}
	var old unix.Rlimit
	report("prlimit64(getpid(), get)", prlimit(unix.Getpid(), 0, uintptr(unsafe.Pointer(&old))))
	// Refused although it would only set the same value again: the filter
	// cannot tell the caller's own pid from another's.
	report("prlimit64(getpid(), set)", prlimit(unix.Getpid(), uintptr(unsafe.Pointer(&cur)), 0))
	report("prlimit64(getppid(), set)", prlimit(unix.Getppid(), 1, 0))
	// Low word 0, and non-canonical: EFAULT if the filter looked at the
	// low word alone.
	report("prlimit64(getppid(), set 1<<63)", prlimit(unix.Getppid(), 1<<63, 0))
}

// errnoErr turns a raw syscall's errno into an error, nil for success.
func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// probeSetID tries, from the filtered thread, to give files in dir set-id
// modes, and the same calls with plain modes.
func probeSetID(dir string) {
	file, setid, node := dir+"/file", dir+"/setid", dir+"/node"
	const creat = unix.O_CREAT | unix.O_WRONLY | unix.O_CLOEXEC

	fd, err := unix.Openat(unix.AT_FDCWD, setid, creat, 0o4755)
	report("openat(O_CREAT, 04755)", err)
	if err == nil {
		unix.Close(fd)
	}
	fd, err = unix.Openat(unix.AT_FDCWD, file, creat, 0o644)
	report("openat(O_CREAT, 0644)", err)
	if err == nil {
		report("fchmod(04755)", unix.Fchmod(fd, 0o4755))
		report("fchmod(0600)", unix.Fchmod(fd, 0o600))
		unix.Close(fd)
	}
	report("chmod(02755)", chmod(file, 0o2755))
	report("mknodat(S_IFREG|04644)", unix.Mknodat(unix.AT_FDCWD, node, unix.S_IFREG|0o4644, 0))

	fd, err = unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC})
	report("openat2", err)
	if err == nil {
		unix.Close(fd)
	}
}

// chmod makes the chmod syscall itself; unix.Chmod uses fchmodat.
func chmod(path string, mode uint32) error {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return err
	}
	// The conversion stays inside the Syscall call, the form that keeps p
	// alive for the duration of the call.
	if _, _, e := unix.Syscall(unix.SYS_CHMOD, uintptr(unsafe.Pointer(p)), uintptr(mode), 0); e != 0 {
		return e
	}
	return nil
}

// unwrapErrno reduces an exec error to its errno, if any.
func unwrapErrno(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// probeInherited runs in a grandchild exec'd by the probe.
func probeInherited() {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		report("child.seccomp", err)
		return
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			fmt.Printf("child.seccomp=%s\n", strings.TrimSpace(v))
		}
	}
	report("child.unshare(CLONE_NEWUSER)", rawSys(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0, false))
}

// probeX32 makes getpid through the x32 ABI, which the filter answers by
// killing the process. No core dump is wanted.
func probeX32() {
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		report("x32", fmt.Errorf("disabling core dumps: %w", err))
		return
	}
	err := rawSys(x32SyscallBit|unix.SYS_GETPID, 0, 0, 0, false)
	report("x32", fmt.Errorf("survived: %v", err)) //nolint:errorlint // err is usually nil here (the call survived): %v prints it
}
