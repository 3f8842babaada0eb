package plan

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Apply carries out ops in order, as warden-exec does, and stops at the
// first that fails, with its Context wrapping the errno. It applies the
// ops that build the sandbox; the program's own (Drain, Sysinfo,
// Seccomp, Exec, Env) are the caller's, which starts the program its own
// way, and Apply refuses them.
func Apply(ops []Op) error {
	for _, op := range ops {
		if err := apply(op); err != nil {
			return fmt.Errorf("%s: %w", op.Context, err)
		}
	}
	return nil
}

// ApplyOne carries out one set-up op and returns its bare error, for the
// Go init's steps that are ops (file identity, the parent-death signal,
// lo), which wrap it in their own step's name.
func ApplyOne(op Op) error { return apply(op) }

// errOwnOp is an op that Apply leaves to its caller.
var errOwnOp = errors.New("an op of the program's start, not the sandbox's set-up")

func apply(op Op) error {
	if err := op.Code.check(uint32(len(op.Ints)), uint32(len(op.Strs))); err != nil {
		return fmt.Errorf("%w: %w", err, unix.EINVAL)
	}
	if fn, ok := appliers[op.Code]; ok {
		return fn(op.Ints, op.Strs)
	}
	return fmt.Errorf("%s: %w", op.Code, errOwnOp)
}

// tolerate is err, or nil when it is the op's ok errno.
func tolerate(err error, ok uint64) error {
	var errno syscall.Errno
	if ok != 0 && errors.As(err, &errno) && uint64(errno) == ok {
		return nil
	}
	return err
}

// appliers apply each set-up op; its arguments were counted against the
// table.
var appliers = map[Code]func(ints []uint64, strs []string) error{
	Mount: func(i []uint64, s []string) error {
		return tolerate(unix.Mount(s[0], s[1], s[2], uintptr(i[0]), s[3]), i[1])
	},
	MountSetattr: func(i []uint64, s []string) error {
		err := unix.MountSetattr(unix.AT_FDCWD, s[0], uint(i[1]), &unix.MountAttr{Attr_set: i[0]})
		return tolerate(err, i[2])
	},
	Mkdir:   func(i []uint64, s []string) error { return tolerate(unix.Mkdir(s[0], uint32(i[0])), i[1]) },
	Chmod:   func(i []uint64, s []string) error { return unix.Chmod(s[0], uint32(i[0])) },
	Symlink: func(_ []uint64, s []string) error { return unix.Symlink(s[0], s[1]) },
	Touch: func(i []uint64, s []string) error {
		return writeFile(s[0], "", unix.O_WRONLY|unix.O_CREAT, uint32(i[0]))
	},
	WriteFile: func(i []uint64, s []string) error {
		return writeFile(s[0], s[1], unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, uint32(i[0]))
	},
	Unlink:      func(_ []uint64, s []string) error { return unix.Unlink(s[0]) },
	Umount:      func(i []uint64, s []string) error { return unix.Unmount(s[0], int(i[0])) },
	Rmdir:       func(_ []uint64, s []string) error { return unix.Rmdir(s[0]) },
	PivotRoot:   func([]uint64, []string) error { return unix.PivotRoot(".", ".") },
	Chdir:       func(_ []uint64, s []string) error { return unix.Chdir(s[0]) },
	Sethostname: func(_ []uint64, s []string) error { return unix.Sethostname([]byte(s[0])) },
	Setrlimit: func(i []uint64, _ []string) error {
		// syscall's, not unix's: Go remembers RLIMIT_NOFILE for the
		// children it starts and must see the new value.
		return syscall.Setrlimit(int(i[0]), &syscall.Rlimit{Cur: i[1], Max: i[1]})
	},
	CheckChrdev: func(i []uint64, s []string) error {
		var st unix.Stat_t
		if err := unix.Stat(s[0], &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(uint32(i[0]), uint32(i[1])) {
			return unix.ENODEV
		}
		return nil
	},
	CheckDir: func(_ []uint64, s []string) error {
		var st unix.Stat_t
		if err := unix.Lstat(s[0], &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return unix.ENOTDIR
		}
		return nil
	},
	OpenFD: openFD,
	Close:  func(i []uint64, _ []string) error { return unix.Close(int(i[0])) },
	MoveMount: func(i []uint64, s []string) error {
		return unix.MoveMount(int(i[0]), "", unix.AT_FDCWD, s[0], unix.MOVE_MOUNT_F_EMPTY_PATH)
	},
}

// writeFile opens p with flags and mode, writes content whole and closes.
func writeFile(p, content string, flags int, mode uint32) error {
	fd, err := unix.Open(p, flags|unix.O_CLOEXEC, mode)
	if err != nil {
		return err
	}
	for b := []byte(content); len(b) > 0; {
		n, err := unix.Write(fd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			unix.Close(fd)
			return err
		}
		b = b[n:]
	}
	return unix.Close(fd)
}

// openFD opens s[0] with flags i[0] and moves it to descriptor i[1],
// refusing one that is open: a plan never takes a descriptor its
// executor holds.
func openFD(i []uint64, s []string) error {
	target := int(i[1])
	if _, err := unix.FcntlInt(uintptr(target), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		return unix.EBUSY
	}
	fd, err := unix.Open(s[0], int(i[0])|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if fd == target {
		return nil
	}
	err = unix.Dup3(fd, target, unix.O_CLOEXEC)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	return err
}
