/* Applying a plan's ops, locking down and running the program. */
#ifndef WARDEN_EXEC_EXEC_H
#define WARDEN_EXEC_EXEC_H

#include "plan.h"

/* The status kinds of internal/plan/status.go. */
enum status_kind { ST_RAN = 0, ST_SETUP = 1, ST_EXEC = 2, ST_REFUSED = 3 };

/* Which step of starting the program failed, in a ST_EXEC status's op
 * field: finding the command on PATH, or execve itself, of the path
 * found in PATH entry op - EXEC_EXECVE. */
enum { EXEC_LOOKUP = 0, EXEC_EXECVE = 1 };

struct status {
	uint32_t kind;
	int32_t op, err, exit_code, sig;
};

/* apply_op carries out one set-up op; it returns 0 or an errno. */
int apply_op(const struct op *op);

/* The ops on warden-exec's own process (process.c); each returns 0 or
 * an errno. */
int op_close_range(uint64_t first, uint64_t last, uint64_t flags);
int op_file_identity(uint64_t uid, uint64_t gid);
int op_die_with_host(uint64_t sig, uint64_t fd);
int op_link_up(const char *name);
int op_join_cgroup(uint64_t sock, uint64_t max);
int op_limit_cpus(uint64_t want);

/* run_plan applies p and runs its program, filling st. */
void run_plan(const struct plan *p, struct status *st);

#endif
