/* Running a plan: its set-up ops in order, then lockdown (bounding,
 * ambient and permitted capabilities, no_new_privs, the seccomp filter
 * last) and the program, forked as the sandbox user in a session of its
 * own, while this process stays PID 1: it reaps every orphan, answers
 * the program's sysinfo(2) and drains its output (pid1.c). */
#define _GNU_SOURCE
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The capabilities this process keeps after lockdown: setting the
 * program's ids between fork and exec, and signalling the sandbox's
 * processes (nsinit's keptCaps). The program loses them at exec. */
static const int kept_caps[] = {CAP_SETUID, CAP_SETGID, CAP_KILL};

/* drop_bounding empties the bounding set; on failure *cap is the
 * capability that could not be dropped. */
static int drop_bounding(int *cap)
{
	int c;

	for (c = 0; c < 64; c++) {
		int in = prctl(PR_CAPBSET_READ, c, 0, 0, 0);
		if (in < 0 && errno == EINVAL)
			return 0; /* past the kernel's last capability */
		if (in == 0)
			continue;
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL) {
			*cap = c;
			return errno;
		}
	}
	return 0;
}

/* keep_caps leaves this process the capabilities of kept (n of them,
 * none for n 0), permitted and effective, and no inheritable ones. */
static int keep_caps(const int *kept, size_t n)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	size_t k;

	memset(data, 0, sizeof data);
	for (k = 0; k < n; k++)
		data[kept[k] / 32].permitted |= 1u << (kept[k] % 32);
	data[0].effective = data[0].permitted;
	data[1].effective = data[1].permitted;
	if (syscall(SYS_capset, &hdr, data) < 0)
		return errno;
	return no_dump();
}

/* install_filter installs f, with a listener (close-on-exec, returned in
 * *listener) when listen is set: as seccomp.InstallNotifying, asking that
 * a call PID 1 has read end only by a fatal signal (Linux 5.19), and
 * without that on an older kernel. *step is the lockdown step a failure
 * is reported as. */
static int install_filter(const struct op *f, int listen, int *listener, int *step)
{
	unsigned long flags = listen ? SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV : 0;
	struct sock_filter *prog;
	struct sock_fprog fprog;
	uint32_t k;
	long r;
	int err = 0;

	*step = LOCK_FILTER;
	if (f->nints > 0xffff)
		return EINVAL;
	prog = calloc(f->nints, sizeof *prog);
	if (!prog)
		return ENOMEM;
	for (k = 0; k < f->nints; k++) {
		uint64_t v = f->ints[k];
		prog[k].code = (uint16_t)v;
		prog[k].jt = (uint8_t)(v >> 16);
		prog[k].jf = (uint8_t)(v >> 24);
		prog[k].k = (uint32_t)(v >> 32);
	}
	fprog.len = (unsigned short)f->nints;
	fprog.filter = prog;
	r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &fprog);
	if (r < 0 && errno == EINVAL && listen) {
		r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &fprog);
		if (r < 0 && errno == EINVAL)
			*step = LOCK_LISTENER;
	}
	if (r < 0)
		err = errno;
	else if (listen)
		*listener = (int)r;
	free(prog);
	return err;
}

/* lockdown drops every privilege but kept_caps, in the order the kernel
 * requires, and installs the filter (if any) last, so it covers all
 * after it; with listen, the filter's listener is in *listener. On
 * failure *step is the step that failed (LOCK_*). */
static int lockdown(const struct op *filter, int listen, int *listener, int *step)
{
	int err, cap = 0;

	if (listen && !filter) {
		*step = LOCK_NO_FILTER; /* answers with no filter to send the calls */
		return EINVAL;
	}
	if ((err = drop_bounding(&cap)) != 0) {
		*step = LOCK_BOUNDING + cap;
		return err;
	}
	*step = LOCK_AMBIENT;
	/* EINVAL: a kernel without ambient capabilities, with none to clear. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return errno;
	*step = LOCK_CAPSET;
	if ((err = keep_caps(kept_caps, sizeof kept_caps / sizeof kept_caps[0])) != 0)
		return err;
	*step = LOCK_NO_NEW_PRIVS;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return errno;
	return filter ? install_filter(filter, listen, listener, step) : 0;
}

/* executable says p is a file with an execute bit, as nsinit's
 * checkExecutable: 0, stat's errno (ENOENT: not found), or ENOEXEC for a
 * directory or a file without an execute bit. */
static int executable(const char *p)
{
	struct stat st;

	if (stat(p, &st) < 0)
		return errno;
	if (S_ISDIR(st.st_mode) || (st.st_mode & 0111) == 0)
		return ENOEXEC;
	return 0;
}

/* look_path finds name on the program's PATH (default /usr/bin:/bin),
 * inside the new root, into buf, and sets *entry to the index of the
 * PATH entry it was found in (0 for a name with a slash, taken as it is,
 * relative to cwd), so the host can name the path exec failed on. An
 * empty PATH holds no directory, as Go's filepath.SplitList reads it. */
static int look_path(const char *name, const char *cwd, char *const *env, char *buf, size_t size, int32_t *entry)
{
	const char *path = "/usr/bin:/bin", *dir, *end;
	char *const *e;

	*entry = 0;
	if (strchr(name, '/')) {
		int n = name[0] == '/' ? snprintf(buf, size, "%s", name) : snprintf(buf, size, "%s/%s", cwd, name);
		if (n < 0 || (size_t)n >= size)
			return ENAMETOOLONG;
		return executable(buf);
	}
	for (e = env; e && *e; e++)
		if (strncmp(*e, "PATH=", 5) == 0)
			path = *e + 5;
	if (*path == 0)
		return ENOENT;
	for (dir = path;; dir = end + 1, (*entry)++) {
		int n;
		end = strchr(dir, ':');
		if (!end)
			end = dir + strlen(dir);
		/* as Go's filepath.Join: an empty entry is the name alone */
		if (end == dir)
			n = snprintf(buf, size, "%s", name);
		else
			n = snprintf(buf, size, "%.*s/%s", (int)(end - dir), dir, name);
		if (n >= 0 && (size_t)n < size && executable(buf) == 0)
			return 0;
		if (*end == 0)
			return ENOENT;
	}
}

/* default_signals gives every signal its default disposition: one
 * ignored where warden was started (nohup, a background job of a
 * non-interactive shell) would otherwise pass through exec to the
 * program, as the Go init's unignoreSignals prevents. It calls the
 * kernel directly: the C library's signal(2) refuses the signals it
 * reserves (32 and 33), which a parent may still have ignored. */
static void default_signals(void)
{
	struct {
		void (*handler)(int);
		unsigned long flags;
		void (*restorer)(void);
		uint64_t mask;
	} dfl = {SIG_DFL, 0, NULL, 0};

	for (int sig = 1; sig <= 64; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof dfl.mask);
}

/* The program's own ops, which run_plan keeps for start: the filter, its
 * environment, the drain, the sysinfo answers (the SYSINFO op's index,
 * or -1) and its RLIMIT_CPU, set in the child only (keep_cpu_limit). */
struct own {
	const struct op *filter, *drain, *sysinfo, *cpu;
	int32_t sysinfo_at;
	char *const *env;
};

/* child is the forked program's side: it reports its failure on the
 * close-on-exec pipe. */
static void child(int report, const struct pid1 *s, const struct own *own, const struct op *x, const char *path)
{
	int err = 0;
	sigset_t none;
	struct rlimit cpu = {RLIM_INFINITY, RLIM_INFINITY};

	if (own->cpu)
		cpu.rlim_cur = cpu.rlim_max = own->cpu->ints[1];
	default_signals();
	sigemptyset(&none);
	if ((err = pid1_child_fds(s)) == 0 &&
	    (sigprocmask(SIG_SETMASK, &none, NULL) < 0 || setsid() < 0 ||
	     (own->cpu && setrlimit(RLIMIT_CPU, &cpu) < 0) ||
	     setresgid((gid_t)x->ints[1], (gid_t)x->ints[1], (gid_t)x->ints[1]) < 0 ||
	     setresuid((uid_t)x->ints[0], (uid_t)x->ints[0], (uid_t)x->ints[0]) < 0 ||
	     chdir(x->strs[1]) < 0))
		err = errno;
	if (!err) {
		execve(path, x->strs + 2, own->env);
		err = errno;
	}
	while (write(report, &err, sizeof err) < 0 && errno == EINTR)
		;
	_exit(127);
}

/* reap waits for pid while reaping every orphan the PID namespace hands
 * to its init: for a program that never started, whose end is known. */
static void reap(pid_t pid)
{
	for (;;) {
		int ws;
		pid_t got = wait4(-1, &ws, 0, NULL);
		if ((got < 0 && errno != EINTR) || got == pid)
			return;
	}
}


/* answers_as_user checks that PID 1 already holds the sandbox user's
 * file identity (a FileIdentity op before SYSINFO), which the kernel
 * lets it open the caller's /proc/TID/mem by. It is a check, never a
 * change: changing fsuid or fsgid after DieWithHost would clear the
 * parent-death signal (commit_creds), and the box would outlive a dead
 * host. setfs[ug]id(-1) only reads the current value. */
static int answers_as_user(const struct op *si)
{
	if ((uint64_t)setfsgid((gid_t)-1) != si->ints[4] || (uint64_t)setfsuid((uid_t)-1) != si->ints[3])
		return EINVAL;
	return 0;
}

/* fail marks st as a failure of op at with err. */
static void fail(struct status *st, int32_t at, int err)
{
	st->kind = ST_SETUP;
	st->op = at;
	st->err = err;
}

/* exec_failed marks st as the program's failed start at the path found
 * in PATH entry entry, with err. */
static void exec_failed(struct status *st, int32_t entry, int err)
{
	st->kind = ST_EXEC;
	st->op = EXEC_EXECVE + entry;
	st->err = err;
}

/* start forks the program of EXEC op x (index i) and serves it until it
 * ends (pid1_run). */
static void start(const struct plan *p, uint32_t i, const struct own *own, struct status *st)
{
	const struct op *x = &p->ops[i];
	struct pid1 s;
	char path[4096];
	int pipefd[2], err = 0, step = 0;
	int32_t entry;
	ssize_t n;
	pid_t pid;

	memset(&s, 0, sizeof s);
	s.listener = -1;
	s.drain = own->drain != NULL;
	st->op = (int32_t)i;
	if ((err = look_path(x->strs[2], x->strs[1], own->env, path, sizeof path, &entry)) != 0) {
		st->kind = ST_EXEC;
		st->op = EXEC_LOOKUP;
		st->err = err;
		return;
	}
	for (int k = 0; s.drain && k < 2; k++)
		s.out[k].limit1 = own->drain->ints[k] == UINT64_MAX ? UINT64_MAX : own->drain->ints[k] + 1;
	if ((err = pid1_prepare(&s)) != 0) {
		fail(st, (int32_t)i, err);
		return;
	}
	if ((err = lockdown(own->filter, own->sysinfo != NULL, &s.listener, &step)) != 0) {
		st->kind = ST_LOCKDOWN;
		st->op = step;
		st->err = err;
		return;
	}
	/* The pipe and the fork fail as the Go init's fork/exec does (os/exec
	 * makes the same pipe): reported as a start failure of the path
	 * found, so the host gives the same exit 126 and text. */
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		exec_failed(st, entry, errno);
		return;
	}
	pid = fork();
	if (pid < 0) {
		exec_failed(st, entry, errno);
		close(pipefd[0]);
		close(pipefd[1]);
		return;
	}
	if (pid == 0)
		child(pipefd[1], &s, own, x, path);
	close(pipefd[1]);
	pid1_parent_fds(&s);
	do
		n = read(pipefd[0], &err, sizeof err);
	while (n < 0 && errno == EINTR);
	close(pipefd[0]);
	if (n == (ssize_t)sizeof err) {
		reap(pid);
		exec_failed(st, entry, err);
		return;
	}
	/* PID 1's loop needs no capability: it only reaps, answers by its
	 * file identity and relays; the namespace ends with it. */
	if ((err = keep_caps(NULL, 0)) != 0) {
		kill(pid, SIGKILL);
		reap(pid);
		st->kind = ST_LOCKDOWN;
		st->op = LOCK_CAPSET;
		st->err = err;
		return;
	}
	pid1_run(&s, pid, st);
}

/* keep_cpu_limit makes sure the program can be given RLIMIT_CPU op's
 * value between fork and exec: PID 1 does not take it (its own CPU time,
 * the drain's and the answers', would count, and the kernel's SIGKILL at
 * the limit would lose the program's status), but keeps a hard limit no
 * lower than it, which the forked child then lowers without a
 * capability. Raising the hard limit is refused (EPERM) where the op
 * would have been. */
static int keep_cpu_limit(const struct op *op)
{
	struct rlimit cur, none = {RLIM_INFINITY, RLIM_INFINITY};

	if (getrlimit(RLIMIT_CPU, &cur) < 0)
		return errno;
	if (op->ints[1] > cur.rlim_max && setrlimit(RLIMIT_CPU, &none) < 0)
		return errno;
	return 0;
}

/* host_pipes says whether this process's fds 1 and 2, where DRAIN relays
 * to, are pipes: the relay splices without a copy and never blocks its
 * loop on them, which it cannot promise of a terminal or a file. */
static int host_pipes(void)
{
	struct stat a, b;

	return fstat(1, &a) == 0 && S_ISFIFO(a.st_mode) && fstat(2, &b) == 0 && S_ISFIFO(b.st_mode);
}

/* op_sysinfo checks a SYSINFO op's descriptors and prepares the
 * answerer. */
static int op_sysinfo(const struct op *op)
{
	uint64_t usage = op->ints[1], proc = op->ints[2];

	if ((usage != UINT64_MAX && (usage > INT32_MAX || fcntl((int)usage, F_GETFD) < 0)) ||
	    proc > INT32_MAX || fcntl((int)proc, F_GETFD) < 0)
		return EBADF;
	return sysinfo_prepare(op->ints[0], usage == UINT64_MAX ? -1 : (int)usage, (int)proc, boot_sec);
}

void run_plan(const struct plan *p, struct status *st)
{
	struct own own = {NULL, NULL, NULL, NULL, -1, NULL};
	uint32_t i;

	for (i = 0; i < p->nops; i++) {
		const struct op *op = &p->ops[i];
		int err;

		switch (op->code) {
		case OP_SECCOMP:
			own.filter = op;
			continue;
		case OP_ENV:
			own.env = op->strs;
			continue;
		case OP_DRAIN:
			if (!host_pipes()) {
				fail(st, (int32_t)i, EINVAL);
				return;
			}
			own.drain = op;
			continue;
		case OP_SETRLIMIT:
			if (op->ints[0] != RLIMIT_CPU)
				break;
			if ((err = keep_cpu_limit(op)) != 0) {
				fail(st, (int32_t)i, err);
				return;
			}
			own.cpu = op;
			continue;
		case OP_SYSINFO:
			if ((err = answers_as_user(op)) != 0 || (err = op_sysinfo(op)) != 0) {
				fail(st, (int32_t)i, err);
				return;
			}
			own.sysinfo = op;
			own.sysinfo_at = (int32_t)i;
			continue;
		case OP_EXEC:
			if (i + 1 != p->nops) {
				st->kind = ST_REFUSED; /* the program must come last */
				st->op = (int32_t)i;
				return;
			}
			if (!own.env)
				own.env = op->strs + op->nstrs;
			/* the answers' identity is the program's */
			if (own.sysinfo && (own.sysinfo->ints[3] != op->ints[0] || own.sysinfo->ints[4] != op->ints[1])) {
				fail(st, own.sysinfo_at, EINVAL);
				return;
			}
			start(p, i, &own, st);
			return;
		}
		if ((err = apply_op(op)) != 0) {
			fail(st, (int32_t)i, err);
			return;
		}
	}
	st->kind = ST_REFUSED; /* no program to run */
	st->op = (int32_t)p->nops;
}
