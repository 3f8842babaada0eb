/* The set-up ops: each one system call (or a check), as the Go applier
 * (internal/plan/apply_linux.go) makes it. */
#define _GNU_SOURCE
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif

/* The kernel's struct mount_attr (linux/mount.h), MOUNT_ATTR_SIZE_VER0. */
struct wmount_attr {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

/* ok_or returns 0 when the call succeeded or failed with the op's ok
 * errno, else the errno. */
static int ok_or(int rc, uint64_t ok)
{
	if (rc == 0)
		return 0;
	if (ok != 0 && (uint64_t)errno == ok)
		return 0;
	return errno;
}

/* write_all writes b whole to fd: 0, or the errno (EIO for a write that
 * wrote nothing, which would otherwise loop for ever). */
int write_all(int fd, const void *b, size_t n)
{
	const char *p = b;

	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int write_file(const char *p, const char *content, int flags, mode_t mode)
{
	int fd, err;

	fd = open(p, flags | O_CLOEXEC, mode);
	if (fd < 0)
		return errno;
	err = write_all(fd, content, strlen(content));
	if (close(fd) < 0 && err == 0)
		err = errno;
	return err;
}

static int open_fd(const char *p, int flags, int target)
{
	int fd, err = 0;

	if (fcntl(target, F_GETFD) >= 0 || errno != EBADF)
		return EBUSY;
	fd = open(p, flags | O_CLOEXEC);
	if (fd < 0)
		return errno;
	if (fd == target)
		return 0;
	if (dup3(fd, target, O_CLOEXEC) < 0)
		err = errno;
	if (close(fd) < 0 && err == 0)
		err = errno;
	return err;
}

static int check_chrdev(const char *p, uint64_t major, uint64_t minor)
{
	struct stat st;

	if (stat(p, &st) < 0)
		return errno;
	if (!S_ISCHR(st.st_mode) || st.st_rdev != makedev((unsigned)major, (unsigned)minor))
		return ENODEV;
	return 0;
}

static int check_dir(const char *p)
{
	struct stat st;

	if (lstat(p, &st) < 0)
		return errno;
	return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

static int set_attr(const char *p, uint64_t attrs, uint64_t flags, uint64_t ok)
{
	struct wmount_attr a = {attrs, 0, 0, 0};

	return ok_or((int)syscall(SYS_mount_setattr, AT_FDCWD, p, (unsigned)flags, &a, sizeof a), ok);
}

static int set_rlimit(uint64_t res, uint64_t v)
{
	struct rlimit r = {v, v};

	return setrlimit((int)res, &r) < 0 ? errno : 0;
}

int apply_op(const struct op *op)
{
	const uint64_t *i = op->ints;
	char *const *s = op->strs;

	switch (op->code) {
	case OP_MOUNT:
		return ok_or(mount(s[0], s[1], s[2], (unsigned long)i[0], s[3]), i[1]);
	case OP_MOUNT_SETATTR:
		return set_attr(s[0], i[0], i[1], i[2]);
	case OP_MKDIR:
		return ok_or(mkdir(s[0], (mode_t)i[0]), i[1]);
	case OP_CHMOD:
		return chmod(s[0], (mode_t)i[0]) < 0 ? errno : 0;
	case OP_SYMLINK:
		return symlink(s[0], s[1]) < 0 ? errno : 0;
	case OP_TOUCH:
		return write_file(s[0], "", O_WRONLY | O_CREAT, (mode_t)i[0]);
	case OP_WRITE_FILE:
		return write_file(s[0], s[1], O_WRONLY | O_CREAT | O_TRUNC, (mode_t)i[0]);
	case OP_UNLINK:
		return unlink(s[0]) < 0 ? errno : 0;
	case OP_UMOUNT:
		return umount2(s[0], (int)i[0]) < 0 ? errno : 0;
	case OP_RMDIR:
		return rmdir(s[0]) < 0 ? errno : 0;
	case OP_PIVOT_ROOT:
		return syscall(SYS_pivot_root, ".", ".") < 0 ? errno : 0;
	case OP_CHDIR:
		return chdir(s[0]) < 0 ? errno : 0;
	case OP_SETHOSTNAME:
		return sethostname(s[0], strlen(s[0])) < 0 ? errno : 0;
	case OP_SETRLIMIT:
		return set_rlimit(i[0], i[1]);
	case OP_CHECK_CHRDEV:
		return check_chrdev(s[0], i[0], i[1]);
	case OP_CHECK_DIR:
		return check_dir(s[0]);
	case OP_OPEN_FD:
		return open_fd(s[0], (int)i[0], (int)i[1]);
	case OP_CLOSE:
		return close((int)i[0]) < 0 ? errno : 0;
	case OP_MOVE_MOUNT:
		return syscall(SYS_move_mount, (int)i[0], "", AT_FDCWD, s[0], MOVE_MOUNT_F_EMPTY_PATH) < 0 ? errno : 0;
	case OP_UNSHARE:
		return unshare((int)i[0]) < 0 ? errno : 0;
	case OP_CLOSE_RANGE:
		return op_close_range(i[0], i[1], i[2]);
	case OP_FILE_IDENTITY:
		return op_file_identity(i[0], i[1]);
	case OP_DIE_WITH_HOST:
		return op_die_with_host(i[0], i[1]);
	case OP_LINK_UP:
		return op_link_up(s[0]);
	case OP_JOIN_CGROUP:
		return op_join_cgroup(i[0], i[1]);
	case OP_LIMIT_CPUS:
		return op_limit_cpus(i[0]);
	}
	return EINVAL;
}
