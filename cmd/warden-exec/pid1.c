/* PID 1's one loop once the program runs: it reaps every child (a
 * signalfd for SIGCHLD, blocked in PID 1 only), answers the program's
 * sysinfo(2) on the seccomp listener (sysinfo.c), and drains the
 * program's output (DRAIN): at most limit+1 bytes of each stream reach
 * the host, the rest is dropped here, in the box's cgroup, so a flood
 * costs the box's CPU quota and the host next to nothing. Nothing in the
 * loop blocks: relaying splices without blocking on either pipe, and
 * sysinfo answers are paced by not reading the listener. */
#define _GNU_SOURCE
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The sysinfo pacing and the listener's failure budget, as nsinit's
 * maxAnswersPerSecond, recvBackoff and maxRecvFailures. */
#define MAX_ANSWERS_PER_SECOND 2000
#define RECV_BACKOFF_NS 10000000LL
#define MAX_RECV_FAILURES 100
/* Once the program is reaped, the host owes what its pipes hold then;
 * a host that takes nothing of it for this long gets nothing more. */
#define FINAL_WAIT_MS 10000
/* The most one splice relays: a pipe's default capacity is 64 KiB, a
 * larger one still moves in a few steps. */
#define RELAY_MAX (1u << 20)

static char drop_buf[65536];
/* null is the box's /dev/null, where splice drops a flood without
 * copying it, or -1: drop_buf then takes it. */
static int null = -1;

/* open_null opens the box's /dev/null, if it is the null device: a
 * file of that name would store what splice drops. */
static void open_null(void)
{
	struct stat st;

	null = open("/dev/null", O_WRONLY | O_CLOEXEC | O_NOCTTY);
	if (null >= 0 && (fstat(null, &st) < 0 || !S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3))) {
		close(null);
		null = -1;
	}
}

int pid1_prepare(struct pid1 *s)
{
	sigset_t chld;
	int k;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &chld, NULL) < 0)
		return errno;
	s->sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	if (s->sigfd < 0)
		return errno;
	if (!s->drain)
		return 0;
	open_null();
	/* a host that hung up must not kill PID 1: writes then fail EPIPE */
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		return errno;
	for (k = 0; k < 2; k++) {
		int p[2];
		if (pipe2(p, O_CLOEXEC) < 0)
			return errno;
		s->out[k].in = p[0];
		s->out[k].child = p[1];
		s->out[k].host = k + 1;
		/* the program's end stays blocking, as a stdout it inherits */
		if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0)
			return errno;
	}
	return 0;
}

int pid1_child_fds(const struct pid1 *s)
{
	int k;

	if (s->listener >= 0)
		close(s->listener);
	close(s->sigfd);
	if (!s->drain)
		return 0;
	if (null >= 0)
		close(null);
	for (k = 0; k < 2; k++) {
		close(s->out[k].in);
		/* the pipes never take fd 1 or 2: DRAIN found them open */
		if (dup2(s->out[k].child, k + 1) < 0)
			return errno;
		close(s->out[k].child);
	}
	return 0;
}

void pid1_parent_fds(struct pid1 *s)
{
	int k;

	if (!s->drain)
		return;
	for (k = 0; k < 2; k++) {
		close(s->out[k].child);
		s->out[k].child = -1;
	}
}

/* budget is how many more bytes of d the host may get. */
static uint64_t budget(const struct stream *d)
{
	return d->limit1 > d->relayed ? d->limit1 - d->relayed : 0;
}

/* drop takes one step of d's pipe past the budget: spliced to the box's
 * /dev/null, or read into drop_buf. It returns 0 at EOF (the pipe is
 * closed) or when nothing is there. */
static int drop(struct stream *d)
{
	ssize_t n = -1;

	if (null >= 0) {
		n = splice(d->in, NULL, null, NULL, sizeof drop_buf, SPLICE_F_NONBLOCK);
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			close(null); /* read and drop from now on */
			null = -1;
		}
	}
	if (null < 0)
		n = read(d->in, drop_buf, sizeof drop_buf);
	if (n < 0 && errno == EINTR)
		return 1;
	if (n < 0 && errno == EAGAIN)
		return 0;
	if (n <= 0) {
		close(d->in); /* every writer is gone, or the pipe failed */
		d->in = -1;
		return 0;
	}
	return 1;
}

/* splice_host splices at most max bytes of d's pipe to the host's pipe,
 * blocking on neither: the bytes moved, 0 at EOF, or -1 with errno. */
static ssize_t splice_host(struct stream *d, uint64_t max)
{
	ssize_t n = splice(d->in, NULL, d->host, NULL, max < RELAY_MAX ? (size_t)max : RELAY_MAX, SPLICE_F_NONBLOCK);

	if (n > 0)
		d->relayed += (uint64_t)n;
	return n;
}

/* relay moves what the budget allows of d's pipe to the host without a
 * copy. It returns 1 when it moved something, else 0, with d->host_full
 * set when the pipe holds bytes the host cannot take yet (EAGAIN is
 * either side's). */
static int relay(struct stream *d)
{
	ssize_t n = splice_host(d, budget(d));
	int queued = 0;

	if (n > 0)
		return 1;
	if (n == 0) {
		close(d->in); /* every writer is gone */
		d->in = -1;
		return 0;
	}
	if (errno == EINTR)
		return 1;
	if (errno == EAGAIN)
		d->host_full = ioctl(d->in, FIONREAD, &queued) == 0 && queued > 0;
	else
		d->relayed = d->limit1; /* EPIPE and the like: drop the rest */
	return 0;
}

/* move takes one step of d's pipe: relayed while the budget lasts, then
 * dropped. */
static void move(struct stream *d)
{
	if (budget(d) > 0)
		relay(d);
	else
		drop(d);
}

/* reap_all reaps every child that has ended, noting the program's end;
 * it returns 1 once the program is reaped. */
static int reap_all(struct pid1 *s, pid_t pid, struct status *st)
{
	struct signalfd_siginfo si;
	int ws;
	pid_t got;

	while (read(s->sigfd, &si, sizeof si) == (ssize_t)sizeof si)
		;
	while ((got = waitpid(-1, &ws, WNOHANG)) > 0) {
		if (got != pid)
			continue;
		if (WIFEXITED(ws)) {
			st->exit_code = WEXITSTATUS(ws);
			s->done = 1;
		} else if (WIFSIGNALED(ws)) {
			st->sig = WTERMSIG(ws);
			st->exit_code = 128 + st->sig;
			s->done = 1;
		}
	}
	if (got < 0 && errno == ECHILD && !s->done) {
		st->kind = ST_SETUP;
		st->err = ECHILD;
		s->done = 1;
	}
	return s->done;
}

/* listening says whether the listener is read now, and if not, sets
 * *wait_ms to when it may be again (pacing, or the back-off after a
 * failure). */
static int listening(struct pid1 *s, int64_t now, int *wait_ms)
{
	int64_t until = 0;

	if (s->listener < 0)
		return 0;
	if (now - s->window_start >= 1000000000LL) {
		s->window_start = now;
		s->answered = 0;
	}
	if (s->answered >= MAX_ANSWERS_PER_SECOND)
		until = s->window_start + 1000000000LL;
	if (s->backoff_until > now && s->backoff_until > until)
		until = s->backoff_until;
	if (until <= now)
		return 1;
	*wait_ms = (int)((until - now + 999999) / 1000000);
	return 0;
}

/* serve answers one sysinfo call on the listener, counting it against
 * the pace; a failure of the listener backs off RECV_BACKOFF_NS, and
 * MAX_RECV_FAILURES of them in a row close it. */
static void serve(struct pid1 *s)
{
	int r = sysinfo_serve_one(s->listener);

	if (r > 0) {
		s->answered++;
		s->failures = 0;
		return;
	}
	if (r == 0)
		return;
	s->backoff_until = clock_ns(CLOCK_MONOTONIC) + RECV_BACKOFF_NS;
	if (++s->failures >= MAX_RECV_FAILURES) {
		/* later calls fail with ENOSYS rather than wait for ever */
		close(s->listener);
		s->listener = -1;
	}
}

/* owed_bytes is what the host is owed of d once the program is reaped:
 * what its pipe holds now, within the budget (what orphans write later
 * is not owed). */
static uint64_t owed_bytes(const struct stream *d)
{
	int queued = 0;

	if (d->in < 0 || ioctl(d->in, FIONREAD, &queued) < 0 || queued <= 0)
		return 0;
	return (uint64_t)queued < budget(d) ? (uint64_t)queued : budget(d);
}

/* pid1_final relays what the host is owed of both streams, polling both
 * host pipes together (a host that reads one stream to its end before the
 * other would otherwise wait on PID 1 while PID 1 waits on it), each
 * wait bounded by FINAL_WAIT_MS; then it closes the pipes, dropping the
 * rest. */
static void pid1_final(struct pid1 *s)
{
	uint64_t owed[2] = {0, 0};
	int k;

	for (k = 0; s->drain && k < 2; k++)
		owed[k] = owed_bytes(&s->out[k]);
	while (owed[0] > 0 || owed[1] > 0) {
		struct pollfd p[2];
		int n;
		for (k = 0; k < 2; k++)
			p[k] = (struct pollfd){owed[k] > 0 ? s->out[k].host : -1, POLLOUT, 0};
		n = poll(p, 2, FINAL_WAIT_MS);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* the host took nothing for FINAL_WAIT_MS, or poll failed */
		for (k = 0; k < 2; k++) {
			ssize_t moved;
			if (!p[k].revents)
				continue;
			moved = splice_host(&s->out[k], owed[k]);
			if (moved > 0)
				owed[k] -= (uint64_t)moved;
			else if (moved == 0 || (errno != EAGAIN && errno != EINTR))
				owed[k] = 0; /* the pipe is empty, or the host is gone */
		}
	}
	for (k = 0; s->drain && k < 2; k++) {
		if (s->out[k].in >= 0)
			close(s->out[k].in);
		s->out[k].in = -1;
	}
}

enum { P_SIG, P_LISTENER, P_OUT, P_ERR, P_HOST1, P_HOST2, P_N };

void pid1_run(struct pid1 *s, pid_t pid, struct status *st)
{
	struct pollfd p[P_N];
	int k;

	if (s->listener >= 0)
		sysinfo_sync_wake_up(s->listener);
	for (;;) {
		int wait_ms = -1;
		for (k = 0; k < P_N; k++)
			p[k] = (struct pollfd){-1, 0, 0};
		p[P_SIG] = (struct pollfd){s->sigfd, POLLIN, 0};
		if (listening(s, clock_ns(CLOCK_MONOTONIC), &wait_ms))
			p[P_LISTENER] = (struct pollfd){s->listener, POLLIN, 0};
		for (k = 0; s->drain && k < 2; k++) {
			struct stream *d = &s->out[k];
			if (d->host_full)
				p[P_HOST1 + k] = (struct pollfd){d->host, POLLOUT, 0};
			else if (d->in >= 0)
				p[P_OUT + k] = (struct pollfd){d->in, POLLIN, 0};
		}
		if (poll(p, P_N, wait_ms) < 0 && errno != EINTR) {
			st->kind = ST_SETUP;
			st->err = errno;
			return;
		}
		/* reaping only once SIGCHLD came: a flood wakes PID 1 often */
		if (p[P_SIG].revents && reap_all(s, pid, st))
			break;
		/* the listener never hangs up: PID 1 is under its filter */
		if (p[P_LISTENER].revents & POLLIN)
			serve(s);
		for (k = 0; s->drain && k < 2; k++) {
			if (p[P_OUT + k].revents)
				move(&s->out[k]);
			if (p[P_HOST1 + k].revents)
				s->out[k].host_full = 0;
		}
	}
	pid1_final(s);
}
