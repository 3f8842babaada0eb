/* The ops that prepare warden-exec's own process before the root is
 * built, as internal/plan/apply_process_linux.go makes them. */
#define _GNU_SOURCE
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

/* JOIN_CGROUP accepts at most this many descriptors, whatever the op
 * says: one per v1 hierarchy, four today. */
#define MAX_RIGHTS 16

int op_close_range(uint64_t first, uint64_t last, uint64_t flags)
{
	return syscall(SYS_close_range, (unsigned)first, (unsigned)last, (unsigned)flags) < 0 ? errno : 0;
}

/* setgroups_allowed says whether /proc/self/setgroups reads "allow\n";
 * any failure to read it counts as no, as in Go. */
static int setgroups_allowed(void)
{
	char b[16];
	ssize_t n;
	int fd = open("/proc/self/setgroups", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	do
		n = read(fd, b, sizeof b);
	while (n < 0 && errno == EINTR);
	close(fd);
	return n == 6 && memcmp(b, "allow\n", 6) == 0;
}

int op_file_identity(uint64_t uid, uint64_t gid)
{
	/* the raw call: this thread only, as Go's RawSyscall */
	if (setgroups_allowed() && syscall(SYS_setgroups, 0, NULL) < 0)
		return errno;
	setfsgid((gid_t)gid); /* cannot report failure */
	setfsuid((uid_t)uid); /* nor this */
	return no_dump();
}

int no_dump(void)
{
	return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ? errno : 0;
}

int op_die_with_host(uint64_t sig, uint64_t fd)
{
	struct pollfd p = {(int)fd, POLLRDHUP, 0};
	int n;

	if (prctl(PR_SET_PDEATHSIG, (unsigned long)sig, 0, 0, 0) < 0)
		return errno;
	n = poll(&p, 1, 0);
	if (n < 0)
		return errno;
	if (n > 0 && (p.revents & (POLLRDHUP | POLLHUP)))
		return EPIPE;
	return 0;
}

int op_link_up(const char *name)
{
	struct ifreq ifr;
	int fd, err = 0;

	if (strlen(name) >= IFNAMSIZ)
		return EINVAL;
	memset(&ifr, 0, sizeof ifr);
	memcpy(ifr.ifr_name, name, strlen(name));
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
		err = errno;
	} else {
		ifr.ifr_flags = (short)((unsigned short)ifr.ifr_flags | IFF_UP);
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
			err = errno;
	}
	close(fd);
	return err;
}

/* receive_rights reads one byte with up to max descriptors into fds and
 * returns how many, or -errno. */
static int receive_rights(int sock, int max, int *fds)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(MAX_RIGHTS * sizeof(int))];
	} u;
	char byte;
	struct iovec iov = {&byte, 1};
	struct msghdr m;
	struct cmsghdr *c;
	ssize_t n;
	int got = 0, err = 0;

	memset(&m, 0, sizeof m);
	memset(&u, 0, sizeof u);
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = u.b;
	m.msg_controllen = CMSG_SPACE((size_t)max * sizeof(int));
	do
		n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		size_t k, nfds;
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (k = 0; k < nfds && got < max; k++)
			memcpy(&fds[got++], CMSG_DATA(c) + k * sizeof(int), sizeof(int));
	}
	if (m.msg_flags & MSG_CTRUNC)
		err = EMSGSIZE;
	else if (n == 0)
		err = EPIPE;
	if (err) {
		while (got > 0)
			close(fds[--got]);
		return -err;
	}
	return got;
}

int op_join_cgroup(uint64_t sock, uint64_t max)
{
	int fds[MAX_RIGHTS], n, k, first = 0;

	if (max == 0 || max > MAX_RIGHTS)
		return EINVAL;
	n = receive_rights((int)sock, (int)max, fds);
	if (n < 0)
		return -n;
	for (k = 0; k < n; k++) {
		ssize_t w;
		do
			w = write(fds[k], "0", 1);
		while (w < 0 && errno == EINTR);
		if (w < 0 && !first)
			first = errno;
		if (close(fds[k]) < 0 && !first)
			first = errno;
	}
	return first;
}

/* MAX_MASK_WORDS bounds the CPU mask tried, as Go's maxMaskWords: 1<<20
 * CPUs, far above any kernel's NR_CPUS. */
#define MAX_MASK_WORDS (1u << 14)

/* get_affinity reads this thread's CPU mask into a buffer it allocates,
 * starting at 1024 bits and doubling while the kernel says it is too
 * small (EINVAL), as Go's affinity. */
static int get_affinity(uint64_t **mask, size_t *words)
{
	size_t w;

	for (w = 16; w <= MAX_MASK_WORDS; w *= 2) {
		uint64_t *m = calloc(w, sizeof *m);
		if (!m)
			return ENOMEM;
		if (syscall(SYS_sched_getaffinity, 0, w * sizeof *m, m) >= 0) {
			*mask = m;
			*words = w;
			return 0;
		}
		free(m);
		if (errno != EINVAL)
			return errno;
	}
	return EINVAL;
}

/* narrow keeps want of the CPUs set in mask (words long), starting at
 * cpu (the first set one if cpu is not) and wrapping around, as Go's
 * narrow; it returns the new mask, or NULL. */
static uint64_t *narrow(const uint64_t *mask, size_t words, long cpu, uint64_t want)
{
	size_t nbits = words * 64, start = 0, i, c;
	uint64_t *out = calloc(words, sizeof *out), kept = 0;

	if (!out)
		return NULL;
	if (cpu >= 0 && (size_t)cpu < nbits && (mask[cpu / 64] >> (cpu % 64) & 1))
		start = (size_t)cpu;
	else
		for (start = 0; start < nbits && !(mask[start / 64] >> (start % 64) & 1); start++)
			;
	for (i = 0; i < nbits && kept < want; i++) {
		c = (start + i) % nbits;
		if (mask[c / 64] >> (c % 64) & 1) {
			out[c / 64] |= (uint64_t)1 << (c % 64);
			kept++;
		}
	}
	return out;
}

int op_limit_cpus(uint64_t want)
{
	uint64_t *mask = NULL, *out, allowed = 0;
	size_t words = 0, k;
	unsigned cpu;
	long cur = -1;
	int err;

	if (want == 0)
		return 0;
	if ((err = get_affinity(&mask, &words)) != 0)
		return err;
	for (k = 0; k < words; k++)
		allowed += (uint64_t)__builtin_popcountll(mask[k]);
	if (want >= allowed) {
		free(mask);
		return 0;
	}
	if (syscall(SYS_getcpu, &cpu, NULL, NULL) >= 0)
		cur = (long)cpu;
	out = narrow(mask, words, cur, want);
	free(mask);
	if (!out)
		return ENOMEM;
	err = syscall(SYS_sched_setaffinity, 0, words * sizeof *out, out) < 0 ? errno : 0;
	free(out);
	return err;
}
