/* The plan warden-exec applies: see internal/plan (the encoding, the op
 * codes and their arguments) and docs/protocol.md. */
#ifndef WARDEN_EXEC_PLAN_H
#define WARDEN_EXEC_PLAN_H

#include <stddef.h>
#include <stdint.h>

#define PLAN_VERSION 3
#define PLAN_MAX_BYTES (1u << 20)
#define PLAN_MAX_OPS 4096u
#define PLAN_MAX_INTS 4096u
#define PLAN_MAX_STRS 1024u

/* Op codes, as internal/plan/ops.go numbers them. */
enum op_code {
	OP_MOUNT = 1,
	OP_MOUNT_SETATTR,
	OP_MKDIR,
	OP_CHMOD,
	OP_SYMLINK,
	OP_TOUCH,
	OP_WRITE_FILE,
	OP_UNLINK,
	OP_UMOUNT,
	OP_RMDIR,
	OP_PIVOT_ROOT,
	OP_CHDIR,
	OP_SETHOSTNAME,
	OP_SETRLIMIT,
	OP_CHECK_CHRDEV,
	OP_CHECK_DIR,
	OP_OPEN_FD,
	OP_CLOSE,
	OP_MOVE_MOUNT,
	OP_DRAIN,
	OP_SECCOMP,
	OP_EXEC,
	OP_ENV,
	OP_UNSHARE,
	OP_CLOSE_RANGE,
	OP_FILE_IDENTITY,
	OP_DIE_WITH_HOST,
	OP_LINK_UP,
	OP_JOIN_CGROUP,
	OP_LIMIT_CPUS,
	OP_SYSINFO,
	OP_END
};

/* One decoded op: its ints, and its strings NUL-terminated (lens holds
 * each string's length). strs has one slot more than nstrs, set to NULL,
 * so argv and envp can point into it. */
struct op {
	uint32_t code;
	uint32_t nints, nstrs;
	const uint64_t *ints; /* unaligned in the buffer: copied out */
	uint64_t *intv;
	char **strs;
};

struct plan {
	uint32_t nops;
	struct op *ops;
};

/* plan_decode reads buf[0..len) into p, allocating what it needs. It
 * returns 0, or -1 with *bad set to the index of the op it stopped at
 * (-1 before the first). It never reads past len. */
int plan_decode(const unsigned char *buf, size_t len, struct plan *p, int32_t *bad);

/* op_known says whether this build applies code, with the counts it
 * allows. */
int op_counts_ok(uint32_t code, uint32_t nints, uint32_t nstrs);

#endif
