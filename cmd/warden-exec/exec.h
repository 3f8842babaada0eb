/* Applying a plan's ops, locking down and running the program. */
#ifndef WARDEN_EXEC_EXEC_H
#define WARDEN_EXEC_EXEC_H

#include "plan.h"

#include <sys/types.h>
#include <time.h>

/* Exit codes nsinit gives the same ends (reply.go): no host to talk to,
 * and a host's request refused. */
#define EXIT_NO_HOST 111
#define EXIT_REFUSED 112

/* HELLO_TAG opens the host's hello, which asks warden-exec to make the
 * sandbox's namespaces: become_pid1, called once it is read, makes them
 * with the host and returns in PID 1 of the new PID namespace; the
 * process that called it ends (unshare.c). */
#define HELLO_TAG "WXNS"
void become_pid1(void);

/* The control socket, and how long warden-exec waits for the host's next
 * bytes on it (spawn.UnshareWait): the host sends each message, and the
 * plan, at once, so only a host that is stuck meets it. A handshake
 * message from warden-exec is MSG_BYTES (a tag and two u32s). receive
 * reads exactly n bytes, each wait so bounded: 0, or -1 at EOF, error or
 * timeout (unshare.c). */
#define CONTROL_FD 3
#define HOST_WAIT_MS 10000
#define MSG_BYTES 12
int receive(unsigned char *b, size_t n);
/* write_all writes b whole to fd: 0, or the errno (apply.c). */
int write_all(int fd, const void *b, size_t n);

/* The handshake's other tags and the steps of a FAILED_TAG message, as
 * internal/plan/unshare.go has them. */
#define MAPPED_TAG "WXMP"
#define USERNS_TAG "WXUS"
#define PID_TAG "WXPD"
#define FAILED_TAG "WXER"
enum { STEP_HELLO = 1, STEP_USERNS, STEP_MAPPED, STEP_NAMESPACES, STEP_CAPS, STEP_CLONE };

/* The status kinds of internal/plan/status.go. */
enum status_kind { ST_RAN = 0, ST_SETUP = 1, ST_EXEC = 2, ST_REFUSED = 3, ST_LOCKDOWN = 4 };

/* The lockdown steps of a ST_LOCKDOWN status's op field, as
 * internal/plan/status.go numbers them: dropping bounding capability c is
 * LOCK_BOUNDING + c. */
enum {
	LOCK_BOUNDING = 0,
	LOCK_AMBIENT = 64,
	LOCK_CAPSET,
	LOCK_NO_NEW_PRIVS,
	LOCK_FILTER,
	LOCK_LISTENER,
	LOCK_NO_FILTER
};

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
/* no_dump makes this process not dumpable again, after a change of its
 * credentials that the kernel may have reset it on: the program, which may
 * share its uid, must not read PID 1's memory or descriptors through
 * /proc/1. It returns 0 or an errno. */
int no_dump(void);

/* One drained output stream of the program (DRAIN): PID 1 reads its
 * pipe (in; the program holds child as its fd 1 or 2) and relays at most
 * limit1 (the limit + 1) bytes to host, its own fd 1 or 2, a pipe. */
struct stream {
	int in, child, host;
	uint64_t limit1, relayed;
	int host_full; /* the host's pipe took no more */
};

/* What PID 1 serves while the program runs (pid1.c). */
struct pid1 {
	int sigfd;    /* SIGCHLD, blocked in PID 1 */
	int listener; /* the seccomp listener, or -1 (no SYSINFO op) */
	int drain;    /* whether out is used (a DRAIN op) */
	int done;     /* the program is reaped */
	struct stream out[2];
	/* sysinfo pacing: answers since window_start; the listener's
	 * unexpected failures in a row, and when it is read again */
	int answered, failures;
	int64_t window_start, backoff_until;
};

/* pid1_prepare blocks SIGCHLD for a signalfd and makes the drain pipes;
 * pid1_child_fds gives the forked program its ends (and closes PID 1's),
 * pid1_parent_fds closes the program's ends in PID 1; each returns 0 or
 * an errno. pid1_run serves until pid ends, then relays what is left of
 * its output and fills st with how it ended. */
int pid1_prepare(struct pid1 *s);
int pid1_child_fds(const struct pid1 *s);
void pid1_parent_fds(struct pid1 *s);
void pid1_run(struct pid1 *s, pid_t pid, struct status *st);

/* The sysinfo answerer (sysinfo.c). sysinfo_prepare takes the box's
 * memory total (0: the host's, read now, before the filter), the usage
 * and /proc descriptors (-1: none) and PID 1's start on CLOCK_BOOTTIME;
 * sysinfo_serve_one answers one call on listener: 1, 0 for a call gone
 * before it was read (or EINTR), -1 for an unexpected failure. */
int sysinfo_prepare(uint64_t total, int usage, int procfd, int64_t start_sec);
void sysinfo_sync_wake_up(int listener);
int sysinfo_serve_one(int listener);

/* clock_ns is clock c now, in nanoseconds: CLOCK_MONOTONIC for PID 1's
 * pacing and back-off (never set back, and counting no suspend),
 * CLOCK_BOOTTIME for the box's uptime (as the Go answerer's). */
int64_t clock_ns(clockid_t c);

/* boot_sec is PID 1's start on CLOCK_BOOTTIME, in seconds: the box's
 * uptime counts from it. */
extern int64_t boot_sec;

/* run_plan applies p and runs its program, filling st. */
void run_plan(const struct plan *p, struct status *st);

#endif
