package plan

import "fmt"

// Code names an operation. Its arguments are listed with each; "ok
// errno" is an errno the op treats as success (0: none), which is how an
// op makes the same run-time decision in both executors (a directory that
// may exist, a /proc entry a kernel may lack).
type Code uint32

// The operations. Codes are part of the encoding: never renumber one,
// append new ones.
const (
	// Mount: ints flags, ok errno; strs source, target, fstype, data.
	Mount Code = 1 + iota
	// MountSetattr adds mount attributes (MOUNT_ATTR_*): ints attr_set,
	// at flags (AT_RECURSIVE), ok errno; strs path.
	MountSetattr
	// Mkdir: ints mode, ok errno; strs path. The umask applies, as it is
	// inherited from the host by either executor.
	Mkdir
	// Chmod: ints mode; strs path.
	Chmod
	// Symlink: strs target, link path.
	Symlink
	// Touch creates an empty regular file if none is there (open with
	// O_CREAT|O_WRONLY, then close): ints mode; strs path.
	Touch
	// WriteFile creates or truncates a file and writes content: ints
	// mode; strs path, content.
	WriteFile
	// Unlink: strs path.
	Unlink
	// Umount: ints flags; strs path.
	Umount
	// Rmdir: strs path.
	Rmdir
	// PivotRoot is pivot_root(".", "."), which stacks the old root on
	// the new one (the working directory); no arguments.
	PivotRoot
	// Chdir: strs path.
	Chdir
	// Sethostname: strs name.
	Sethostname
	// Setrlimit sets soft and hard limit: ints resource, value.
	Setrlimit
	// CheckChrdev fails with ENODEV unless path (followed) is the
	// character device major:minor: ints major, minor; strs path.
	CheckChrdev
	// CheckDir fails with ENOTDIR unless path (not followed) is a
	// directory: strs path.
	CheckDir
	// OpenFD opens path and moves the descriptor to fd, which must not be
	// open (else EBUSY), close-on-exec: ints open flags, fd; strs path.
	OpenFD
	// Close: ints fd.
	Close
	// MoveMount attaches a detached mount held at a descriptor: ints fd;
	// strs target.
	MoveMount
	// Drain relays at most limit+1 bytes of the program's stdout and
	// stderr to the host, then discards the rest inside the sandbox:
	// ints stdout limit, stderr limit.
	Drain
	// Seccomp is the filter to install last, before the program starts:
	// ints one sock_filter each (code | jt<<16 | jf<<24 | k<<32).
	Seccomp
	// Exec is the program: ints uid, gid; strs path, cwd, then argv.
	Exec
	// Env is the program's environment: strs KEY=value each.
	Env
	// Unshare leaves namespaces (CLONE_NEW* flags): ints flags.
	Unshare
	// CloseRange is close_range(2): ints first, last, flags.
	CloseRange
	// FileIdentity drops the supplementary groups when
	// /proc/self/setgroups allows it, then sets the filesystem gid and
	// uid: ints uid, gid.
	FileIdentity
	// DieWithHost sets the parent-death signal, then fails with EPIPE if
	// the host already hung up the control socket: ints signal, fd.
	DieWithHost
	// LinkUp sets IFF_UP on a network interface: strs name.
	LinkUp
	// JoinCgroup receives the cgroup v1 tasks descriptors the host sends
	// on the control socket (one byte with SCM_RIGHTS; EPIPE if the host
	// hung up, EMSGSIZE past max), writes "0" to each and closes them:
	// ints socket fd, max descriptors.
	JoinCgroup
	// LimitCPUs narrows the CPU affinity to want CPUs, starting at the
	// current one (NarrowCPUs); 0 leaves it: ints want.
	LimitCPUs
	// Sysinfo makes warden-exec's PID 1 answer the program's sysinfo(2)
	// with the box's figures, as internal/nsinit's answerer does: the
	// Seccomp op's filter is installed with a listener that PID 1 alone
	// holds. ints total memory bytes (0: the host's), usage fd (an OpenFD
	// of the cgroup's memory.usage_in_bytes, or ^uint64(0) for none),
	// proc fd (an OpenFD of the new root's /proc), uid, gid (the sandbox
	// user's, the file identity PID 1 writes the answer with).
	Sysinfo
	// codeEnd follows the last code.
	codeEnd
)

// counts are the bounds of one code's ints and strs.
type counts struct {
	name             string
	minInts, maxInts uint32
	minStrs, maxStrs uint32
}

// table is the one source of the codes' names and counts; the C executor
// has the same table (cmd/warden-exec/plan.c), checked by a test.
var table = map[Code]counts{
	Mount:        {"MOUNT", 2, 2, 4, 4},
	MountSetattr: {"MOUNT_SETATTR", 3, 3, 1, 1},
	Mkdir:        {"MKDIR", 2, 2, 1, 1},
	Chmod:        {"CHMOD", 1, 1, 1, 1},
	Symlink:      {"SYMLINK", 0, 0, 2, 2},
	Touch:        {"TOUCH", 1, 1, 1, 1},
	WriteFile:    {"WRITE_FILE", 1, 1, 2, 2},
	Unlink:       {"UNLINK", 0, 0, 1, 1},
	Umount:       {"UMOUNT", 1, 1, 1, 1},
	Rmdir:        {"RMDIR", 0, 0, 1, 1},
	PivotRoot:    {"PIVOT_ROOT", 0, 0, 0, 0},
	Chdir:        {"CHDIR", 0, 0, 1, 1},
	Sethostname:  {"SETHOSTNAME", 0, 0, 1, 1},
	Setrlimit:    {"SETRLIMIT", 2, 2, 0, 0},
	CheckChrdev:  {"CHECK_CHRDEV", 2, 2, 1, 1},
	CheckDir:     {"CHECK_DIR", 0, 0, 1, 1},
	OpenFD:       {"OPEN_FD", 2, 2, 1, 1},
	Close:        {"CLOSE", 1, 1, 0, 0},
	MoveMount:    {"MOVE_MOUNT", 1, 1, 1, 1},
	Drain:        {"DRAIN", 2, 2, 0, 0},
	Seccomp:      {"SECCOMP", 1, MaxInts, 0, 0},
	Exec:         {"EXEC", 2, 2, 3, MaxStrs},
	Env:          {"ENV", 0, 0, 0, MaxStrs},
	Unshare:      {"UNSHARE", 1, 1, 0, 0},
	CloseRange:   {"CLOSE_RANGE", 3, 3, 0, 0},
	FileIdentity: {"FILE_IDENTITY", 2, 2, 0, 0},
	DieWithHost:  {"DIE_WITH_HOST", 2, 2, 0, 0},
	LinkUp:       {"LINK_UP", 0, 0, 1, 1},
	JoinCgroup:   {"JOIN_CGROUP", 2, 2, 0, 0},
	LimitCPUs:    {"LIMIT_CPUS", 1, 1, 0, 0},
	Sysinfo:      {"SYSINFO", 5, 5, 0, 0},
}

// String is the code's name, as the C executor spells it.
func (c Code) String() string {
	if t, ok := table[c]; ok {
		return t.name
	}
	return fmt.Sprintf("Code(%d)", uint32(c))
}

// check says whether an op of code c may have nints ints and nstrs strs.
func (c Code) check(nints, nstrs uint32) error {
	t, ok := table[c]
	if !ok {
		return fmt.Errorf("unknown op code %d", uint32(c))
	}
	if nints < t.minInts || nints > t.maxInts {
		return fmt.Errorf("op %s has %d ints, want %d to %d", t.name, nints, t.minInts, t.maxInts)
	}
	if nstrs < t.minStrs || nstrs > t.maxStrs {
		return fmt.Errorf("op %s has %d strings, want %d to %d", t.name, nstrs, t.minStrs, t.maxStrs)
	}
	return nil
}
