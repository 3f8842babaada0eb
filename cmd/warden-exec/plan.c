/* Decoding a plan: bounded, never past the buffer; see plan.h. */
#include "plan.h"

#include <stdlib.h>
#include <string.h>

struct counts {
	int known;
	uint32_t min_ints, max_ints, min_strs, max_strs;
};

/* The table of internal/plan/ops.go (codes and counts), checked by
 * TestExecutorTable. TestDecodeAsGo checks plan_decode against Go's
 * Decode under the sanitizers (internal/plan/testdata/decode_harness.c). */
static const struct counts table[OP_END] = {
	[OP_MOUNT] = {1, 2, 2, 4, 4},
	[OP_MOUNT_SETATTR] = {1, 3, 3, 1, 1},
	[OP_MKDIR] = {1, 2, 2, 1, 1},
	[OP_CHMOD] = {1, 1, 1, 1, 1},
	[OP_SYMLINK] = {1, 0, 0, 2, 2},
	[OP_TOUCH] = {1, 1, 1, 1, 1},
	[OP_WRITE_FILE] = {1, 1, 1, 2, 2},
	[OP_UNLINK] = {1, 0, 0, 1, 1},
	[OP_UMOUNT] = {1, 1, 1, 1, 1},
	[OP_RMDIR] = {1, 0, 0, 1, 1},
	[OP_PIVOT_ROOT] = {1, 0, 0, 0, 0},
	[OP_CHDIR] = {1, 0, 0, 1, 1},
	[OP_SETHOSTNAME] = {1, 0, 0, 1, 1},
	[OP_SETRLIMIT] = {1, 2, 2, 0, 0},
	[OP_CHECK_CHRDEV] = {1, 2, 2, 1, 1},
	[OP_CHECK_DIR] = {1, 0, 0, 1, 1},
	[OP_OPEN_FD] = {1, 2, 2, 1, 1},
	[OP_CLOSE] = {1, 1, 1, 0, 0},
	[OP_MOVE_MOUNT] = {1, 1, 1, 1, 1},
	[OP_DRAIN] = {1, 2, 2, 0, 0},
	[OP_SECCOMP] = {1, 1, PLAN_MAX_INTS, 0, 0},
	[OP_EXEC] = {1, 2, 2, 3, PLAN_MAX_STRS},
	[OP_ENV] = {1, 0, 0, 0, PLAN_MAX_STRS},
	[OP_UNSHARE] = {1, 1, 1, 0, 0},
	[OP_CLOSE_RANGE] = {1, 3, 3, 0, 0},
	[OP_FILE_IDENTITY] = {1, 2, 2, 0, 0},
	[OP_DIE_WITH_HOST] = {1, 2, 2, 0, 0},
	[OP_LINK_UP] = {1, 0, 0, 1, 1},
	[OP_JOIN_CGROUP] = {1, 2, 2, 0, 0},
	[OP_LIMIT_CPUS] = {1, 1, 1, 0, 0},
	[OP_SYSINFO] = {1, 5, 5, 0, 0},
};

int op_counts_ok(uint32_t code, uint32_t nints, uint32_t nstrs)
{
	const struct counts *c;

	if (code == 0 || code >= OP_END)
		return 0;
	c = &table[code];
	if (!c->known)
		return 0; /* a code this build does not apply */
	return nints >= c->min_ints && nints <= c->max_ints &&
	       nstrs >= c->min_strs && nstrs <= c->max_strs;
}

struct reader {
	const unsigned char *b;
	size_t len, off;
};

static int get32(struct reader *r, uint32_t *v)
{
	if (r->len - r->off < 4)
		return -1;
	*v = (uint32_t)r->b[r->off] | (uint32_t)r->b[r->off + 1] << 8 |
	     (uint32_t)r->b[r->off + 2] << 16 | (uint32_t)r->b[r->off + 3] << 24;
	r->off += 4;
	return 0;
}

static int get64(struct reader *r, uint64_t *v)
{
	uint32_t lo, hi;

	if (r->len - r->off < 8 || get32(r, &lo) || get32(r, &hi))
		return -1;
	*v = (uint64_t)hi << 32 | lo;
	return 0;
}

/* get_str copies a string out, NUL-terminated, refusing one that holds
 * NUL. */
static int get_str(struct reader *r, char **s)
{
	uint32_t n;

	if (get32(r, &n) || r->len - r->off < n)
		return -1;
	if (memchr(r->b + r->off, 0, n))
		return -1;
	*s = malloc((size_t)n + 1);
	if (!*s)
		return -1;
	memcpy(*s, r->b + r->off, n);
	(*s)[n] = 0;
	r->off += n;
	return 0;
}

static int get_op(struct reader *r, struct op *op)
{
	uint32_t i;

	if (get32(r, &op->code) || get32(r, &op->nints) || get32(r, &op->nstrs))
		return -1;
	if (!op_counts_ok(op->code, op->nints, op->nstrs))
		return -1;
	op->intv = calloc((size_t)op->nints + 1, sizeof(uint64_t));
	op->strs = calloc((size_t)op->nstrs + 1, sizeof(char *));
	if (!op->intv || !op->strs)
		return -1;
	for (i = 0; i < op->nints; i++)
		if (get64(r, &op->intv[i]))
			return -1;
	for (i = 0; i < op->nstrs; i++)
		if (get_str(r, &op->strs[i]))
			return -1;
	op->ints = op->intv;
	return 0;
}

int plan_decode(const unsigned char *buf, size_t len, struct plan *p, int32_t *bad)
{
	struct reader r = {buf, len, 0};
	uint32_t version, n, i;

	*bad = -1;
	if (len > PLAN_MAX_BYTES || len < 12 || memcmp(buf, "WPLN", 4) != 0)
		return -1;
	r.off = 4;
	if (get32(&r, &version) || version != PLAN_VERSION || get32(&r, &n) || n > PLAN_MAX_OPS)
		return -1;
	p->nops = n;
	p->ops = calloc((size_t)n + 1, sizeof(struct op));
	if (!p->ops)
		return -1;
	for (i = 0; i < n; i++) {
		if (get_op(&r, &p->ops[i])) {
			*bad = (int32_t)i;
			return -1;
		}
	}
	if (r.off != len) {
		*bad = (int32_t)n;
		return -1;
	}
	return 0;
}
