// Command probe is the hostile program of the e2e suite: run inside a
// sandbox, it attempts one attack (or a batch of them) and prints one
// machine-readable line per attempt, "name=result", where result is "ok"
// or "errno=ENAME". It never damages anything even if the sandbox were
// broken: syscalls get an invalid descriptor, pointer or flag, so an allowed
// call fails harmlessly (EBADF, EFAULT, EINVAL) and only a denied one says
// EPERM; host-wide files are opened, never written; signals are signal 0.
//
// Usage: probe CHECK [ARGS...]
//
//	all                 every syscall-policy check of the table below
//	x32                 one syscall through the x32 ABI (must be killed)
//	openw PATH...       open each existing PATH O_WRONLY (no write)
//	create PATH...      create each new PATH O_WRONLY|O_CREAT|O_EXCL, then remove it
//	read PATH...        read up to 64 KiB of each PATH
//	readlink PATH...    readlink each PATH
//	stat PATH...        lstat each PATH
//	kill PID            kill(PID, 0)
//	fds                 the open descriptors, less the one listing them
//	env                 the environment's keys
//	tty                 open /dev/tty and report the controlling tty
//	tcp HOST:PORT       connect
//	unix PATH|@NAME     connect to a unix socket (@ for abstract)
//	ifaces              network interfaces and whether they are up
//	lookup NAME         resolve NAME with the Go resolver
//	statfs PATH         mount flags of PATH
//	ids                 real, effective and saved uid and gid
//	tiocsti             push one byte into stdin's terminal input queue
//	chmod MODE PATH     chmod PATH to octal MODE
//	creatmode MODE PATH create PATH with octal MODE
//	setcap PATH         set an empty security.capability xattr on PATH
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe CHECK [ARGS...]")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "all":
		for _, c := range checks {
			fmt.Printf("%s=%s\n", c.name, result(c.fn()))
		}
	case "x32":
		// getpid through the x32 ABI; the filter must kill the process
		// before the kernel even looks at the number.
		_, _, e := unix.RawSyscall(39|0x40000000, 0, 0, 0)
		fmt.Printf("x32=survived %s\n", result(errnoErr(e)))
	case "openw":
		each(args, openWrite)
	case "create":
		each(args, create)
	case "read":
		each(args, readFile)
	case "readlink":
		each(args, func(p string) string {
			s, err := os.Readlink(p)
			if err != nil {
				return result(err)
			}
			return "ok " + s
		})
	case "stat":
		each(args, func(p string) string { var st unix.Stat_t; return result(unix.Lstat(p, &st)) })
	case "kill":
		pid, err := strconv.Atoi(args[0])
		if err != nil {
			fmt.Println("kill=bad pid")
			os.Exit(2)
		}
		fmt.Printf("kill=%s\n", result(unix.Kill(pid, 0)))
	case "fds":
		fmt.Printf("fds=%s\n", fds())
	case "env":
		keys := []string{}
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			keys = append(keys, k)
		}
		slices.Sort(keys)
		fmt.Printf("env=%s\n", strings.Join(keys, ","))
	case "tty":
		fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		fmt.Printf("devtty=%s\n", result(err))
		fmt.Printf("tty_nr=%s\n", ttyNr())
	case "tcp":
		fmt.Printf("tcp=%s\n", result(connect(unix.AF_INET, args[0])))
	case "unix":
		fmt.Printf("unix=%s\n", result(connect(unix.AF_UNIX, args[0])))
	case "ifaces":
		ifs, err := net.Interfaces()
		if err != nil {
			fmt.Printf("ifaces=%s\n", result(err))
			break
		}
		var names []string
		for _, i := range ifs {
			state := "down"
			if i.Flags&net.FlagUp != 0 {
				state = "up"
			}
			names = append(names, i.Name+":"+state)
		}
		fmt.Printf("ifaces=%s\n", strings.Join(names, ","))
	case "lookup":
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, args[0])
		if err != nil {
			fmt.Println("lookup=failed")
			break
		}
		fmt.Printf("lookup=ok %s\n", strings.Join(addrs, ","))
	case "statfs":
		var st unix.Statfs_t
		if err := unix.Statfs(args[0], &st); err != nil {
			fmt.Printf("statfs=%s\n", result(err))
			break
		}
		var flags []string
		for _, f := range []struct {
			bit  int64
			name string
		}{{unix.ST_RDONLY, "ro"}, {unix.ST_NOSUID, "nosuid"}, {unix.ST_NODEV, "nodev"}, {unix.ST_NOEXEC, "noexec"}} {
			if st.Flags&f.bit != 0 {
				flags = append(flags, f.name)
			}
		}
		fmt.Printf("statfs=%s\n", strings.Join(flags, ","))
	case "ids":
		ru, eu, su := unix.Getresuid()
		rg, eg, sg := unix.Getresgid()
		fmt.Printf("uid=%d,%d,%d\ngid=%d,%d,%d\n", ru, eu, su, rg, eg, sg)
	case "tiocsti":
		fmt.Printf("tiocsti=%s\n", result(ioctl(0, unix.TIOCSTI)()))
	case "chmod":
		mode, _ := strconv.ParseUint(args[0], 8, 32)
		fmt.Printf("chmod=%s\n", result(unix.Chmod(args[1], uint32(mode))))
	case "creatmode":
		mode, _ := strconv.ParseUint(args[0], 8, 32)
		fd, err := unix.Open(args[1], unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, uint32(mode))
		if err == nil {
			unix.Close(fd)
		}
		fmt.Printf("creatmode=%s\n", result(err))
	case "setcap":
		// struct vfs_cap_data, revision 2, with every set empty: even if
		// the kernel took it, it would grant nothing.
		val := make([]byte, 20)
		val[3] = 0x02 // VFS_CAP_REVISION_2, little-endian magic_etc
		fmt.Printf("setcap=%s\n", result(unix.Setxattr(args[0], "security.capability", val, 0)))
	default:
		fmt.Fprintf(os.Stderr, "unknown check %q\n", os.Args[1])
		os.Exit(2)
	}
}

// result renders an error as the line's value.
func result(err error) string {
	if err == nil {
		return "ok"
	}
	var e unix.Errno
	if errors.As(err, &e) {
		if name := unix.ErrnoName(e); name != "" {
			return "errno=" + name
		}
		return fmt.Sprintf("errno=%d", int(e))
	}
	return "error=" + strings.ReplaceAll(err.Error(), "\n", " ")
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func each(paths []string, fn func(string) string) {
	for _, p := range paths {
		fmt.Printf("%s=%s\n", p, fn(p))
	}
}

// openWrite opens an existing file for writing and closes it unwritten. A
// success on a character device names it, so a masked path (/dev/null bound
// over it) can be told from the real file.
func openWrite(p string) string {
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return result(err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR {
		return fmt.Sprintf("ok chr=%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	}
	return "ok"
}

func create(p string) string {
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return result(err)
	}
	unix.Close(fd)
	_ = unix.Unlink(p) // the probe's file dies with the sandbox; only the open's answer is reported
	return "ok"
}

func readFile(p string) string {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return result(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 64<<10)
	total := 0
	for total < len(buf) {
		n, err := unix.Read(fd, buf[total:])
		if err != nil {
			return result(err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	return fmt.Sprintf("ok len=%d", total)
}

// fds lists /proc/self/fd with raw syscalls (the os package would open an
// epoll descriptor of its own) and leaves out the listing's descriptor.
func fds() string {
	dir, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return result(err)
	}
	defer unix.Close(dir)
	var names []string
	buf := make([]byte, 8192)
	for range 64 {
		n, err := unix.Getdents(dir, buf)
		if err != nil {
			return result(err)
		}
		if n == 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	var out []int
	for _, s := range names {
		fd, err := strconv.Atoi(s)
		if err == nil && fd != dir {
			out = append(out, fd)
		}
	}
	slices.Sort(out)
	strs := make([]string, len(out))
	for i, fd := range out {
		strs[i] = strconv.Itoa(fd)
	}
	return strings.Join(strs, ",")
}

// ttyNr is field 7 of /proc/self/stat: the controlling terminal, 0 for none.
func ttyNr() string {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return result(err)
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 5 {
		return "unparsable"
	}
	return f[4]
}

// connect makes one blocking connect; the caller's sandbox timeout bounds it.
func connect(family int, addr string) error {
	var sa unix.Sockaddr
	typ := unix.SOCK_STREAM
	switch family {
	case unix.AF_INET:
		ap, err := netipAddrPort(addr)
		if err != nil {
			return err
		}
		sa = ap
	case unix.AF_UNIX:
		name := addr
		if strings.HasPrefix(name, "@") {
			name = "\x00" + name[1:]
		}
		sa = &unix.SockaddrUnix{Name: name}
	}
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, sa)
}

func netipAddrPort(s string) (*unix.SockaddrInet4, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(host).To4()
	p, err := strconv.Atoi(port)
	if ip == nil || err != nil {
		return nil, fmt.Errorf("bad address %q", s)
	}
	sa := &unix.SockaddrInet4{Port: p}
	copy(sa.Addr[:], ip)
	return sa, nil
}

// check is one syscall attempt; the comment after each says what an
// ALLOWED call returns, so that EPERM can only come from the filter (or,
// where noted "cap", from the kernel's own capability check, which the
// sandbox also fails).
type check struct {
	name string
	fn   func() error
}

const (
	bad  = ^uintptr(0) // -1: an invalid descriptor, pid or flag set
	nul  = uintptr(0)  // a NULL pointer
	tiny = uintptr(1)  // an unmapped pointer
)

func sys(nr uintptr, a ...uintptr) func() error {
	return func() error {
		var args [6]uintptr
		copy(args[:], a)
		_, _, e := unix.Syscall6(nr, args[0], args[1], args[2], args[3], args[4], args[5])
		return errnoErr(e)
	}
}

func ioctl(fd, req uintptr) func() error {
	return func() error {
		var c byte = 'x'
		_, _, e := unix.Syscall(unix.SYS_IOCTL, fd, req, uintptr(unsafe.Pointer(&c)))
		return errnoErr(e)
	}
}

func socket(domain, typ, proto uintptr) func() error {
	return func() error {
		fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, domain, typ|unix.SOCK_CLOEXEC, proto)
		if e != 0 {
			return e
		}
		unix.Close(int(fd))
		return nil
	}
}

func socketpair(domain, typ, proto uintptr) func() error {
	return func() error {
		var fds [2]int32
		_, _, e := unix.RawSyscall6(unix.SYS_SOCKETPAIR, domain, typ|unix.SOCK_CLOEXEC, proto, uintptr(unsafe.Pointer(&fds)), 0, 0)
		if e != 0 {
			return e
		}
		unix.Close(int(fds[0]))
		unix.Close(int(fds[1]))
		return nil
	}
}

// persona calls personality(p) and, if that could have changed the
// persona, sets the old one back, so the checks after it run as before.
// The persona belongs to the thread, hence the lock. personality itself
// never fails: an error can only come from the filter.
func persona(p uintptr) func() error {
	return func() error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		old, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, p, 0, 0)
		if e != 0 {
			return e
		}
		if uint32(p) != 0xFFFFFFFF {
			if _, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, old, 0, 0); e != 0 {
				return fmt.Errorf("restoring persona %#x: %w", old, e)
			}
		}
		return nil
	}
}

// prlimitGet reads pid's RLIMIT_NOFILE, new_limit NULL.
func prlimitGet(pid int) func() error {
	return func() error {
		var old unix.Rlimit
		_, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, uintptr(pid), unix.RLIMIT_NOFILE, 0, uintptr(unsafe.Pointer(&old)), 0, 0)
		return errnoErr(e)
	}
}

// prlimitSelfSet sets its own RLIMIT_NOFILE, through pid 0, to what it
// already is.
func prlimitSelfSet() error {
	var cur unix.Rlimit
	if _, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NOFILE, 0, uintptr(unsafe.Pointer(&cur)), 0, 0); e != 0 {
		return fmt.Errorf("getting RLIMIT_NOFILE: %w", e)
	}
	_, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NOFILE, uintptr(unsafe.Pointer(&cur)), 0, 0, 0)
	return errnoErr(e)
}

// noncanon is a non-canonical x86_64 address whose low word is 0: not NULL,
// and never readable, so the kernel fails a copy from it with EFAULT.
const noncanon = uintptr(1) << 63

// cloneNS asks for a namespace together with CLONE_THREAD but without
// CLONE_SIGHAND, which the kernel rejects with EINVAL before anything else:
// an allowed clone can never actually create a process here.
func cloneNS(flag uintptr) func() error {
	return sys(unix.SYS_CLONE, flag|unix.CLONE_THREAD, 0, 0, 0, 0)
}

// badSockType is past SOCK_MAX: an allowed socket() fails with EINVAL
// before the family's code runs.
const badSockType = 15

var checks = []check{
	// io_uring
	{"io_uring_setup", sys(unix.SYS_IO_URING_SETUP, 1, nul)},                       // EFAULT
	{"io_uring_enter", sys(unix.SYS_IO_URING_ENTER, bad, 0, 0, 0, nul, 0)},         // EBADF
	{"io_uring_register", sys(unix.SYS_IO_URING_REGISTER, bad, 0, nul, 0)},         // EBADF
	{"userfaultfd", sys(unix.SYS_USERFAULTFD, bad)},                                // EINVAL
	{"perf_event_open", sys(unix.SYS_PERF_EVENT_OPEN, nul, 0, bad, bad, 0)},        // EFAULT
	{"bpf", sys(unix.SYS_BPF, bad, nul, 0)},                                        // EINVAL
	{"add_key", sys(unix.SYS_ADD_KEY, nul, nul, nul, 0, 0)},                        // EFAULT
	{"keyctl", sys(unix.SYS_KEYCTL, bad, 0, 0, 0, 0)},                              // EOPNOTSUPP
	{"request_key", sys(unix.SYS_REQUEST_KEY, nul, nul, nul, 0)},                   // EFAULT
	{"chroot", sys(unix.SYS_CHROOT, nul)},                                          // EFAULT
	{"fsconfig", sys(unix.SYS_FSCONFIG, bad, bad, nul, nul, 0)},                    // EINVAL
	{"fsmount", sys(unix.SYS_FSMOUNT, bad, bad, 0)},                                // cap
	{"fsopen", sys(unix.SYS_FSOPEN, nul, bad)},                                     // cap
	{"fspick", sys(unix.SYS_FSPICK, bad, nul, bad)},                                // cap
	{"mount", sys(unix.SYS_MOUNT, nul, nul, nul, 0, nul)},                          // EFAULT
	{"mount_setattr", sys(unix.SYS_MOUNT_SETATTR, bad, nul, bad, nul, 0)},          // EINVAL
	{"move_mount", sys(unix.SYS_MOVE_MOUNT, bad, nul, bad, nul, bad)},              // EINVAL
	{"open_tree", sys(unix.SYS_OPEN_TREE, bad, nul, bad)},                          // EINVAL
	{"open_tree_attr", sys(unix.SYS_OPEN_TREE_ATTR, bad, nul, bad, nul, 0)},        // EINVAL
	{"pivot_root", sys(unix.SYS_PIVOT_ROOT, nul, nul)},                             // cap
	{"umount2", sys(unix.SYS_UMOUNT2, nul, bad)},                                   // EINVAL
	{"setns", sys(unix.SYS_SETNS, bad, 0)},                                         // EBADF
	{"unshare", sys(unix.SYS_UNSHARE, bad)},                                        // EINVAL
	{"kcmp", sys(unix.SYS_KCMP, bad, bad, 0, 0, 0)},                                // ESRCH
	{"pidfd_getfd", sys(unix.SYS_PIDFD_GETFD, bad, bad, 0)},                        // EBADF
	{"process_madvise", sys(unix.SYS_PROCESS_MADVISE, bad, nul, 0, 0, bad)},        // EINVAL
	{"process_vm_readv", sys(unix.SYS_PROCESS_VM_READV, 0, nul, 0, nul, 0, bad)},   // EINVAL
	{"process_vm_writev", sys(unix.SYS_PROCESS_VM_WRITEV, 0, nul, 0, nul, 0, bad)}, // EINVAL
	{"ptrace", sys(unix.SYS_PTRACE, unix.PTRACE_PEEKUSR, bad, 0, 0)},               // ESRCH
	{"acct", sys(unix.SYS_ACCT, tiny)},                                             // cap
	{"delete_module", sys(unix.SYS_DELETE_MODULE, nul, 0)},                         // cap
	{"finit_module", sys(unix.SYS_FINIT_MODULE, bad, nul, 0)},                      // cap
	{"init_module", sys(unix.SYS_INIT_MODULE, nul, 0, nul)},                        // cap
	{"kexec_file_load", sys(unix.SYS_KEXEC_FILE_LOAD, bad, bad, 0, nul, bad)},      // cap
	{"kexec_load", sys(unix.SYS_KEXEC_LOAD, 0, 0, nul, bad)},                       // cap
	{"reboot", sys(unix.SYS_REBOOT, 0, 0, 0, nul)},                                 // cap, then EINVAL (bad magic)
	{"swapoff", sys(unix.SYS_SWAPOFF, nul)},                                        // cap
	{"swapon", sys(unix.SYS_SWAPON, nul, 0)},                                       // cap
	{"clock_settime", sys(unix.SYS_CLOCK_SETTIME, 0x7fffffff, nul)},                // EINVAL
	{"fanotify_init", sys(unix.SYS_FANOTIFY_INIT, bad, 0)},                         // EINVAL
	{"ioperm", sys(unix.SYS_IOPERM, 0, 0, 0)},                                      // EINVAL
	{"iopl", sys(unix.SYS_IOPL, 4)},                                                // EINVAL
	{"lookup_dcookie", sys(unix.SYS_LOOKUP_DCOOKIE, 0, nul, 0)},                    // ENOSYS
	{"nfsservctl", sys(unix.SYS_NFSSERVCTL, 0, nul, nul)},                          // ENOSYS
	{"open_by_handle_at", sys(unix.SYS_OPEN_BY_HANDLE_AT, bad, nul, 0)},            // cap
	{"quotactl", sys(unix.SYS_QUOTACTL, bad, nul, 0, nul)},                         // EINVAL
	{"quotactl_fd", sys(unix.SYS_QUOTACTL_FD, bad, 0, 0, nul)},                     // EBADF
	{"setdomainname", sys(unix.SYS_SETDOMAINNAME, nul, bad)},                       // cap
	{"sethostname", sys(unix.SYS_SETHOSTNAME, nul, bad)},                           // cap
	{"settimeofday", sys(unix.SYS_SETTIMEOFDAY, tiny, tiny)},                       // EFAULT
	{"syslog", sys(unix.SYS_SYSLOG, bad, nul, 0)},                                  // EINVAL
	{"uselib", sys(unix.SYS_USELIB, nul)},                                          // EFAULT or ENOSYS
	{"vhangup", sys(unix.SYS_VHANGUP)},                                             // cap
	{"_sysctl", sys(unix.SYS__SYSCTL, nul)},                                        // ENOSYS

	// Set-id mode bits: refused on every syscall that stores a mode, so no
	// set-uid file can be planted through an idmapped workspace.
	{"chmod_plain", sys(unix.SYS_CHMOD, nul, 0o755)},                              // EFAULT: allowed
	{"chmod_setuid", sys(unix.SYS_CHMOD, nul, 0o4755)},                            // EFAULT
	{"fchmod_setgid", sys(unix.SYS_FCHMOD, bad, 0o2755)},                          // EBADF
	{"fchmod_setuid_highword", sys(unix.SYS_FCHMOD, bad, 1<<32|0o4755)},           // EBADF
	{"fchmodat_setuid", sys(unix.SYS_FCHMODAT, bad, nul, 0o4755)},                 // EFAULT
	{"fchmodat2_setuid", sys(unix.SYS_FCHMODAT2, bad, nul, 0o4755, 0)},            // EFAULT
	{"open_creat_setuid", sys(unix.SYS_OPEN, nul, unix.O_CREAT, 0o4755)},          // EFAULT
	{"openat_creat_setuid", sys(unix.SYS_OPENAT, bad, nul, unix.O_CREAT, 0o4755)}, // EFAULT
	{"openat_plain", sys(unix.SYS_OPENAT, bad, nul, unix.O_CREAT, 0o644)},         // EFAULT: allowed
	{"creat_setuid", sys(unix.SYS_CREAT, nul, 0o4755)},                            // EFAULT
	{"mknod_setuid", sys(unix.SYS_MKNOD, nul, unix.S_IFREG|0o4755, 0)},            // EFAULT
	{"mknodat_setgid", sys(unix.SYS_MKNODAT, bad, nul, unix.S_IFREG|0o2755, 0)},   // EFAULT
	{"openat2", sys(unix.SYS_OPENAT2, bad, nul, nul, 0)},                          // EFAULT

	// clone: allowed without namespace flags, denied with any of them.
	{"clone_plain", cloneNS(0)},                        // EINVAL: allowed
	{"clone_newns", cloneNS(unix.CLONE_NEWNS)},         // EINVAL
	{"clone_newcgroup", cloneNS(unix.CLONE_NEWCGROUP)}, // EINVAL
	{"clone_newuts", cloneNS(unix.CLONE_NEWUTS)},       // EINVAL
	{"clone_newipc", cloneNS(unix.CLONE_NEWIPC)},       // EINVAL
	{"clone_newuser", cloneNS(unix.CLONE_NEWUSER)},     // EINVAL
	{"clone_newpid", cloneNS(unix.CLONE_NEWPID)},       // EINVAL
	{"clone_newnet", cloneNS(unix.CLONE_NEWNET)},       // EINVAL
	{"clone3", sys(unix.SYS_CLONE3, nul, 0)},           // EINVAL

	// ioctl: everything but terminal input injection, whatever the high word.
	{"ioctl_tcgets", ioctl(bad, unix.TCGETS)},                  // EBADF: allowed
	{"ioctl_tiocsti", ioctl(bad, unix.TIOCSTI)},                // EBADF
	{"ioctl_tiocsti_highword", ioctl(bad, 0xFFFFFFFF00005412)}, // EBADF
	{"ioctl_tioclinux", ioctl(bad, unix.TIOCLINUX)},            // EBADF
	{"ioctl_tiocsti_stdin", ioctl(0, unix.TIOCSTI)},            // ENOTTY (stdin is a pipe)
	{"ioctl_tioclinux_highword", ioctl(bad, 0x1_0000541C)},     // EBADF

	// socket families: a few allowed, everything else denied.
	{"socket_inet", socket(unix.AF_INET, unix.SOCK_STREAM, 0)},                           // ok
	{"socket_inet6", socket(unix.AF_INET6, unix.SOCK_DGRAM, 0)},                          // ok
	{"socket_unix", socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)},                           // ok
	{"socket_netlink_route", socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)}, // ok
	{"socketpair_unix", socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)},                   // ok
	{"socket_packet", socket(unix.AF_PACKET, badSockType, 0)},                            // EINVAL
	{"socket_alg", socket(unix.AF_ALG, unix.SOCK_SEQPACKET, 0)},                          // ok or EAFNOSUPPORT
	{"socket_vsock", socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)},                         // ok or EAFNOSUPPORT
	{"socket_key", socket(unix.AF_KEY, badSockType, 0)},                                  // EINVAL
	{"socket_xdp", socket(unix.AF_XDP, badSockType, 0)},                                  // EINVAL
	{"socket_tipc", socket(unix.AF_TIPC, badSockType, 0)},                                // EINVAL
	{"socket_rds", socket(unix.AF_RDS, badSockType, 0)},                                  // EINVAL
	{"socket_can", socket(unix.AF_CAN, badSockType, 0)},                                  // EINVAL
	{"socket_bluetooth", socket(unix.AF_BLUETOOTH, badSockType, 0)},                      // EINVAL
	{"socket_netlink_audit", socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT)}, // ok
	{"socket_netlink_netfilter", socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_NETFILTER)},
	{"socket_netlink_uevent", socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_KOBJECT_UEVENT)},
	{"socket_netlink_sock_diag", socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_SOCK_DIAG)},
	{"socket_packet_highword", socket(1<<32|unix.AF_PACKET, badSockType, 0)},                            // EINVAL
	{"socket_netlink_audit_highword", socket(unix.AF_NETLINK, unix.SOCK_RAW, 1<<32|unix.NETLINK_AUDIT)}, // ok
	{"socketpair_packet", socketpair(unix.AF_PACKET, badSockType, 0)},                                   // EINVAL

	// AF_INET and AF_INET6 protocols: the everyday ones allowed, the rest
	// refused before the kernel could load a module for them. The refused
	// ones ask for a bad type, which the kernel rejects before the lookup.
	{"socket_inet_tcp", socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_TCP)},             // ok
	{"socket_inet_udp", socket(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDP)},              // ok
	{"socket_inet6_tcp", socket(unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_TCP)},           // ok
	{"socket_inet_icmp", socket(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP)},            // ok, or EACCES outside ping_group_range
	{"socket_inet6_icmpv6", socket(unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_ICMPV6)},      // ok, or EACCES
	{"socket_inet_tcp_badtype", socket(unix.AF_INET, badSockType, unix.IPPROTO_TCP)},          // EINVAL: allowed
	{"socket_inet_sctp", socket(unix.AF_INET, badSockType, unix.IPPROTO_SCTP)},                // EINVAL
	{"socket_inet6_sctp", socket(unix.AF_INET6, badSockType, unix.IPPROTO_SCTP)},              // EINVAL
	{"socket_inet_dccp", socket(unix.AF_INET, badSockType, unix.IPPROTO_DCCP)},                // EINVAL
	{"socket_inet_l2tp", socket(unix.AF_INET, badSockType, unix.IPPROTO_L2TP)},                // EINVAL
	{"socket_inet_udplite", socket(unix.AF_INET, badSockType, unix.IPPROTO_UDPLITE)},          // EINVAL
	{"socket_inet_mptcp", socket(unix.AF_INET, badSockType, unix.IPPROTO_MPTCP)},              // EINVAL
	{"socket_inet_sctp_highword", socket(unix.AF_INET, badSockType, 1<<32|unix.IPPROTO_SCTP)}, // EINVAL
	{"socketpair_inet_sctp", socketpair(unix.AF_INET, badSockType, unix.IPPROTO_SCTP)},        // EINVAL

	// personality: Docker's personas only (the query, PER_LINUX,
	// PER_LINUX32, UNAME26); flags that change how the next program is
	// mapped are refused. Each change is undone at once.
	{"personality_query", persona(0xFFFFFFFF)},                             // ok
	{"personality_linux", persona(0)},                                      // ok
	{"personality_linux32", persona(0x0008)},                               // ok
	{"personality_uname26", persona(0x0020000)},                            // ok
	{"personality_linux32_highword", persona(1<<32 | 0x0008)},              // ok: the kernel ignores the high word
	{"personality_addr_no_randomize", persona(0x0040000)},                  // ok
	{"personality_read_implies_exec", persona(0x0400000)},                  // ok
	{"personality_addr_no_randomize_highword", persona(1<<32 | 0x0040000)}, // ok

	// prlimit64: changing another process's limits is refused, reading
	// them and changing one's own through pid 0 are not. The refused calls
	// pass an invalid new limit, which the kernel reads before it looks up
	// the process.
	{"prlimit_self_get", prlimitGet(0)},                                                                    // ok
	{"prlimit_self_set", prlimitSelfSet},                                                                   // ok
	{"prlimit_pid_get", prlimitGet(os.Getpid())},                                                           // ok
	{"prlimit_init_set", sys(unix.SYS_PRLIMIT64, 1, unix.RLIMIT_NOFILE, tiny, nul)},                        // EFAULT
	{"prlimit_init_set_noncanon", sys(unix.SYS_PRLIMIT64, 1, unix.RLIMIT_NOFILE, noncanon, nul)},           // EFAULT
	{"prlimit_init_highword_set", sys(unix.SYS_PRLIMIT64, 1<<32|1, unix.RLIMIT_NOFILE, tiny, nul)},         // EFAULT
	{"prlimit_zero_highword_set", sys(unix.SYS_PRLIMIT64, 1<<32, unix.RLIMIT_NOFILE, tiny, nul)},           // EFAULT: allowed, pid 0 to the kernel
	{"prlimit_self_pid_set", sys(unix.SYS_PRLIMIT64, uintptr(os.Getpid()), unix.RLIMIT_NOFILE, tiny, nul)}, // EFAULT (refused: the filter cannot know its own pid)
}
