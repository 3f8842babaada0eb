/* PID 1's answers to the program's sysinfo(2), which the filter of a plan
 * with a SYSINFO op sends to PID 1's listener: a port of internal/nsinit's
 * answerer (sysinfo.go, sysinfo_linux.go, whose comments say why each
 * check exists), with the same figures and checks. PID 1 is in the box's
 * cgroup, so a flood of calls costs the box's CPU quota; every buffer is
 * fixed, and everything read from the box is bounded. */
#define _GNU_SOURCE
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

/* Linux 6.6's synchronous wake-up; an older kernel refuses it harmlessly. */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP 1
#endif
/* SECCOMP_IOCTL_NOTIF_ID_VALID's number before Linux 5.9 (_IOR). */
#define IOCTL_NOTIF_ID_VALID_OLD 0x80082102u

/* struct sysinfo on x86_64, as internal/nsinit/sysinfo.go lays it out. */
#define SYSINFO_SIZE 112
#define SI_UPTIME 0
#define SI_TOTALRAM 32
#define SI_FREERAM 40
#define SI_PROCS 80
#define SI_MEM_UNIT 104

#define PROCS_EVERY_NS 100000000LL /* procsEvery */
#define MAX_MAPS_BYTES (1 << 20)   /* maxMapsBytes */

_Static_assert(sizeof(struct sysinfo) == SYSINFO_SIZE, "struct sysinfo is 112 bytes on x86_64");
_Static_assert(__builtin_offsetof(struct sysinfo, procs) == SI_PROCS, "procs offset");
_Static_assert(__builtin_offsetof(struct sysinfo, mem_unit) == SI_MEM_UNIT, "mem_unit offset");

/* The answerer's state and buffers: one, static, so an answer allocates
 * nothing. */
static struct {
	uint64_t total;
	int usage, procfd;
	int64_t start_sec;
	int procs;
	int64_t counted;
	char path[32];
	char dirents[8192];
	char maps[8192];
	unsigned char info[SYSINFO_SIZE];
	char usage_buf[24];
} a = {.usage = -1, .procfd = -1};

/* now_ns is clock c now, in nanoseconds. */
static int64_t now_ns(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t); /* a valid clock: cannot fail */
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int sysinfo_prepare(uint64_t total, int usage, int procfd, int64_t boot_sec)
{
	if (total == 0) {
		/* before the filter: PID 1's own sysinfo would wait for itself */
		struct sysinfo si;
		if (sysinfo(&si) < 0)
			return errno;
		total = (uint64_t)si.totalram * si.mem_unit;
	}
	a.total = total;
	a.usage = usage;
	a.procfd = procfd;
	a.start_sec = boot_sec;
	return 0;
}

/* put_le stores v's n low bytes at b, little-endian. */
static void put_le(unsigned char *b, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

/* sysinfo_encode lays the figures out as the kernel's struct sysinfo,
 * mem_unit 1, everything else zero (nsinit's encodeSysinfo). */
static void sysinfo_encode(unsigned char *dst, int64_t uptime, uint64_t total, uint64_t free_, int64_t procs)
{
	memset(dst, 0, SYSINFO_SIZE);
	put_le(dst + SI_UPTIME, (uint64_t)(uptime > 0 ? uptime : 0), 8);
	put_le(dst + SI_TOTALRAM, total, 8);
	put_le(dst + SI_FREERAM, free_ < total ? free_ : total, 8);
	put_le(dst + SI_PROCS, (uint64_t)(procs < 0 ? 0 : procs > 65535 ? 65535 : procs), 2);
	put_le(dst + SI_MEM_UNIT, 1, 4);
}

/* count_pids counts the getdents64 records of b named by a process id;
 * a record too short or too long ends the count (nsinit's countPids). */
static int count_pids(const char *b, size_t len)
{
	const size_t name_at = 19;
	int n = 0;

	while (len > name_at) {
		size_t reclen = (size_t)(unsigned char)b[16] | (size_t)(unsigned char)b[17] << 8;
		if (reclen <= name_at || reclen > len)
			break;
		if (b[name_at] >= '1' && b[name_at] <= '9')
			n++;
		b += reclen;
		len -= reclen;
	}
	return n;
}

/* parse_usage reads a decimal byte count and a newline; anything else
 * reads as 0 (nsinit's parseUsage). */
static uint64_t parse_usage(const char *b, size_t len)
{
	uint64_t n = 0;
	int digits = 0;

	for (size_t i = 0; i < len; i++) {
		char c = b[i];
		if (c == '\n' && digits > 0)
			return n;
		if (c < '0' || c > '9' || digits == 19)
			return 0;
		n = n * 10 + (uint64_t)(c - '0');
		digits++;
	}
	return digits ? n : 0;
}

/* parse_hex reads at most 16 lower-case hex digits at b[0..len); it
 * returns how many it read (0: none, or more than 16). */
static size_t parse_hex(const char *b, size_t len, uint64_t *v)
{
	size_t i;

	*v = 0;
	for (i = 0; i < len && i < 17; i++) {
		char c = b[i];
		if (c >= '0' && c <= '9')
			*v = *v << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			*v = *v << 4 | (uint64_t)(c - 'a' + 10);
		else
			break;
	}
	return i <= 16 ? i : 0;
}

/* parse_maps_line reads "start-end perms" of one maps line; 0 for a
 * line of another form (nsinit's parseMapsLine). */
static int parse_maps_line(const char *line, size_t len, uint64_t *lo, uint64_t *hi, int *writable)
{
	size_t n = parse_hex(line, len, lo), m;

	*writable = 0;
	if (n == 0 || n >= len || line[n] != '-')
		return 0;
	line += n + 1;
	len -= n + 1;
	m = parse_hex(line, len, hi);
	if (m == 0 || len - m < 5 || line[m] != ' ' || *hi < *lo)
		return 0;
	*writable = line[m + 2] == 'w';
	return 1;
}

/* tid_path puts "TID/name" in a.path. */
static void tid_path(uint32_t tid, const char *name)
{
	snprintf(a.path, sizeof a.path, "%u/%s", tid, name);
}

/* writable says whether the n bytes at addr are mapped writable in
 * thread tid, from its /proc/TID/maps, as nsinit's writable. */
static int writable(uint32_t tid, uint64_t addr, uint64_t n)
{
	uint64_t covered = addr, end = addr + n;
	size_t kept = 0, read_total = 0;
	int fd, ok = 0;

	tid_path(tid, "maps");
	fd = openat(a.procfd, a.path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	while (read_total < MAX_MAPS_BYTES) {
		ssize_t got = read(fd, a.maps + kept, sizeof a.maps - kept);
		char *buf, *nl;
		size_t left;
		if (got <= 0)
			goto out;
		read_total += (size_t)got;
		buf = a.maps;
		left = kept + (size_t)got;
		while ((nl = memchr(buf, '\n', left)) != NULL) {
			uint64_t lo, hi;
			int w, parsed = parse_maps_line(buf, (size_t)(nl - buf), &lo, &hi, &w);
			left -= (size_t)(nl - buf) + 1;
			buf = nl + 1;
			if (!parsed || lo > covered)
				goto out; /* a gap before the struct's end */
			if (hi > covered && !w)
				goto out;
			if (hi > covered)
				covered = hi;
			if (covered >= end) {
				ok = 1;
				goto out;
			}
		}
		if (left == sizeof a.maps)
			goto out; /* a line longer than the buffer */
		memmove(a.maps, buf, left);
		kept = left;
	}
out:
	close(fd);
	return ok;
}

/* id_valid is 1 when call id still waits, 0 when it is gone (ENOENT),
 * -1 on any other failure, retrying with the old ioctl number. */
static int id_valid(int listener, uint64_t id)
{
	int r = ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id);
	if (r < 0 && errno == EINVAL)
		r = ioctl(listener, IOCTL_NOTIF_ID_VALID_OLD, &id);
	if (r == 0)
		return 1;
	return errno == ENOENT ? 0 : -1;
}

/* count_procs counts the processes of the box's PID namespace, the
 * numbered entries of its /proc, at least PID 1. */
static int count_procs(void)
{
	int n = 0;

	if (a.procfd < 0 || lseek(a.procfd, 0, SEEK_SET) < 0)
		return 1;
	for (;;) {
		long got = syscall(SYS_getdents64, a.procfd, a.dirents, sizeof a.dirents);
		if (got <= 0)
			return n > 1 ? n : 1;
		n += count_pids(a.dirents, (size_t)got);
	}
}

/* used is the box's memory use in bytes, or 0 when it cannot be read. */
static uint64_t used(void)
{
	ssize_t n;

	if (a.usage < 0)
		return 0;
	n = pread(a.usage, a.usage_buf, sizeof a.usage_buf, 0);
	return n < 0 ? 0 : parse_usage(a.usage_buf, (size_t)n);
}

/* figures lays the box's world now out in a.info, counting its
 * processes again at most every PROCS_EVERY_NS. */
static void figures(void)
{
	int64_t at = now_ns(CLOCK_BOOTTIME);
	uint64_t u = used();

	if (a.procs == 0 || at - a.counted >= PROCS_EVERY_NS) {
		a.procs = count_procs();
		a.counted = at;
	}
	sysinfo_encode(a.info, at / 1000000000LL - a.start_sec, a.total, a.total - (u < a.total ? u : a.total), a.procs);
}

/* answer_sysinfo writes the box's struct sysinfo at the caller's
 * pointer; it returns 0 or a negative errno, and sets *send to 0 when
 * the call no longer waits. */
static int answer_sysinfo(int listener, const struct seccomp_notif *req, int *send)
{
	uint64_t addr = req->data.args[0];
	int mem, v;
	ssize_t n;

	*send = 1;
	tid_path(req->pid, "mem");
	mem = a.procfd < 0 ? -1 : openat(a.procfd, a.path, O_WRONLY | O_CLOEXEC);
	if (mem < 0) {
		*send = id_valid(listener, req->id) != 0;
		return -EPERM;
	}
	if (addr > (uint64_t)INT64_MAX - SYSINFO_SIZE || !writable(req->pid, addr, SYSINFO_SIZE)) {
		close(mem);
		*send = id_valid(listener, req->id) != 0;
		return -EFAULT;
	}
	v = id_valid(listener, req->id);
	if (v <= 0) {
		close(mem);
		*send = v < 0; /* gone: the thread id may now name another */
		return -EPERM; /* nothing is written unchecked */
	}
	figures();
	n = pwrite(mem, a.info, SYSINFO_SIZE, (off_t)addr);
	close(mem);
	return n == SYSINFO_SIZE ? 0 : -EFAULT;
}

void sysinfo_sync_wake_up(int listener)
{
	ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
}

int sysinfo_serve_one(int listener)
{
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;
	int send = 1, err = 0;

	memset(&req, 0, sizeof req);
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) {
		/* ENOENT: the caller went away before its call was read */
		return errno == EINTR || errno == ENOENT ? 0 : -1;
	}
	if (req.data.arch != AUDIT_ARCH_X86_64 || req.data.nr != SYS_sysinfo)
		err = -ENOSYS;
	else
		err = answer_sysinfo(listener, &req, &send);
	if (send) {
		memset(&resp, 0, sizeof resp);
		resp.id = req.id;
		resp.error = err;
		/* ENOENT: the caller was killed while the answer was made */
		ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
	}
	return 1;
}
