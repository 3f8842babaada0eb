/* PID 1's one loop once the program runs: it reaps every child (a
 * signalfd for SIGCHLD, blocked in PID 1 only), answers the program's
 * sysinfo(2) on the seccomp listener (sysinfo.c), and drains the
 * program's output (DRAIN): at most limit+1 bytes of each stream reach
 * the host, the rest is dropped here, in the box's cgroup, so a flood
 * costs the box's CPU quota and the host next to nothing. Nothing in the
 * loop blocks: relaying splices without blocking on either pipe (or
 * writes once the host polls writable), and sysinfo answers are paced by
 * not reading the listener. */
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
/* A write to the host of at most PIPE_BUF bytes does not block a pipe
 * that polled writable (the copying relay, for a host fd that does not
 * splice). */
#define HOST_CHUNK 4096
/* Once the program is reaped, at most this many steps of a stream are
 * taken: an orphan that keeps writing cannot hold PID 1 up. */
#define FINAL_STEPS 32
/* The most one splice relays: a pipe's default capacity is 64 KiB, a
 * larger one still moves in a few steps. */
#define RELAY_MAX (1u << 20)

static char drop_buf[65536];
/* null is the box's /dev/null, where splice drops a flood without
 * copying it, or -1: drop_buf then takes it. */
static int null = -1;

static int64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t); /* a valid clock: cannot fail */
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

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
		if (s->out[k].child == k + 1)
			continue; /* the pipe took a closed fd 1 or 2: it is in place */
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

/* fill reads once from d's pipe (called with nothing pending): what the
 * budget allows becomes pending for the host, the rest is dropped
 * (spliced to /dev/null, or read into drop_buf). It returns 0 at EOF or
 * when nothing is there. */
static int fill(struct stream *d)
{
	uint64_t room = budget(d);
	char *dst = room > 0 ? d->buf : drop_buf;
	ssize_t n = -1;

	if (dst == drop_buf && null >= 0) {
		n = splice(d->in, NULL, null, NULL, sizeof drop_buf, SPLICE_F_NONBLOCK);
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			close(null); /* read and drop from now on */
			null = -1;
		}
	}
	if (dst != drop_buf || null < 0)
		n = read(d->in, dst, dst == d->buf ? sizeof d->buf : sizeof drop_buf);

	if (n < 0 && errno == EINTR)
		return 1;
	if (n < 0 && errno == EAGAIN)
		return 0;
	if (n <= 0) {
		close(d->in); /* every writer is gone, or the pipe failed */
		d->in = -1;
		return 0;
	}
	if (dst == d->buf) {
		d->off = 0;
		d->len = (uint64_t)n < room ? (size_t)n : (size_t)room;
	}
	return 1;
}

/* flush writes one chunk of d's pending bytes to the host; a host that
 * is gone takes nothing more. */
static void flush(struct stream *d)
{
	size_t n = d->len - d->off;
	ssize_t w;

	if (n > HOST_CHUNK)
		n = HOST_CHUNK;
	w = write(d->host, d->buf + d->off, n);
	if (w < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (w <= 0) {
		d->relayed = d->limit1; /* EPIPE and the like: drop the rest */
		d->off = d->len = 0;
		return;
	}
	d->off += (size_t)w;
	d->relayed += (uint64_t)w;
	if (d->off == d->len)
		d->off = d->len = 0;
}

/* relay moves what the budget allows of d's pipe to the host without a
 * copy: a splice that blocks on neither pipe. It returns 1 when it moved
 * something, else 0, with d->host_full set when the pipe holds bytes the
 * host cannot take yet (EAGAIN is either side's); a host whose fd does not
 * splice (a terminal) turns d to copying (fill and flush). */
static int relay(struct stream *d)
{
	uint64_t room = budget(d);
	ssize_t n = splice(d->in, NULL, d->host, NULL, room < RELAY_MAX ? (size_t)room : RELAY_MAX, SPLICE_F_NONBLOCK);
	int queued = 0;

	if (n > 0) {
		d->relayed += (uint64_t)n;
		return 1;
	}
	if (n == 0) {
		close(d->in); /* every writer is gone */
		d->in = -1;
		return 0;
	}
	if (errno == EINTR)
		return 1;
	if (errno == EAGAIN)
		d->host_full = ioctl(d->in, FIONREAD, &queued) == 0 && queued > 0;
	else if (errno == EINVAL)
		d->copy = 1;
	else
		d->relayed = d->limit1; /* EPIPE and the like: drop the rest */
	return 0;
}

/* move takes one step of d's pipe: relayed while the budget lasts, then
 * dropped. It returns 0 when nothing moved. */
static int move(struct stream *d)
{
	if (budget(d) > 0 && !d->copy)
		return relay(d) || d->copy;
	return fill(d);
}

/* host_wait is whether d waits for the host to take bytes. */
static int host_wait(const struct stream *d)
{
	return d->len > d->off || d->host_full;
}

/* host_ready is d's host fd polled writable. */
static void host_ready(struct stream *d)
{
	if (d->len > d->off)
		flush(d);
	d->host_full = 0;
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
	s->backoff_until = mono_ns() + RECV_BACKOFF_NS;
	if (++s->failures >= MAX_RECV_FAILURES) {
		/* later calls fail with ENOSYS rather than wait for ever */
		close(s->listener);
		s->listener = -1;
	}
}

enum { P_SIG, P_LISTENER, P_OUT, P_ERR, P_HOST1, P_HOST2, P_N };

void pid1_run(struct pid1 *s, pid_t pid, struct status *st)
{
	struct pollfd p[P_N];
	int k;

	if (s->listener >= 0)
		sysinfo_sync_wake_up(s->listener);
	while (!reap_all(s, pid, st)) {
		int wait_ms = -1;
		for (k = 0; k < P_N; k++)
			p[k] = (struct pollfd){-1, 0, 0};
		p[P_SIG] = (struct pollfd){s->sigfd, POLLIN, 0};
		if (listening(s, mono_ns(), &wait_ms))
			p[P_LISTENER] = (struct pollfd){s->listener, POLLIN, 0};
		for (k = 0; s->drain && k < 2; k++) {
			struct stream *d = &s->out[k];
			if (host_wait(d))
				p[P_HOST1 + k] = (struct pollfd){d->host, POLLOUT, 0};
			else if (d->in >= 0)
				p[P_OUT + k] = (struct pollfd){d->in, POLLIN, 0};
		}
		if (poll(p, P_N, wait_ms) < 0 && errno != EINTR) {
			st->kind = ST_SETUP;
			st->err = errno;
			return;
		}
		if (p[P_LISTENER].revents & POLLIN)
			serve(s);
		else if (p[P_LISTENER].revents & (POLLHUP | POLLERR | POLLNVAL)) {
			close(s->listener); /* no filtered task is left */
			s->listener = -1;
		}
		for (k = 0; s->drain && k < 2; k++) {
			if (p[P_OUT + k].revents)
				move(&s->out[k]);
			if (p[P_HOST1 + k].revents)
				host_ready(&s->out[k]);
		}
	}
	pid1_final(s);
}

void pid1_final(struct pid1 *s)
{
	int k, steps;

	for (k = 0; s->drain && k < 2; k++) {
		struct stream *d = &s->out[k];
		for (steps = 0; d->in >= 0 && steps < FINAL_STEPS; steps++) {
			while (host_wait(d)) {
				struct pollfd h = {d->host, POLLOUT, 0};
				if (poll(&h, 1, -1) < 0 && errno != EINTR) {
					d->relayed = d->limit1;
					d->off = d->len = 0;
					d->host_full = 0;
				} else {
					host_ready(d);
				}
			}
			if (!move(d) && !d->host_full)
				break;
		}
		if (d->in >= 0)
			close(d->in);
		d->in = -1;
	}
}
