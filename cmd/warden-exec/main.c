/* warden-exec builds a one-shot native sandbox from a plan and runs its
 * program, starting no Go runtime (issue 20; docs/protocol.md), with the
 * control socket at fd 3. warden run starts it in its own namespaces,
 * and it makes the sandbox's and its PID 1 with the host (unshare.c);
 * the spawner clones it straight into them as PID 1. PID 1 reads one
 * plan (a u32 little-endian length, then the plan's encoding), applies
 * it, and answers with one fixed status. Every read waits at most
 * HOST_WAIT_MS for the host: a PID 1 whose host went quiet ends. */
#define _GNU_SOURCE
#include "exec.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static void put32(unsigned char *b, uint32_t v)
{
	b[0] = (unsigned char)v;
	b[1] = (unsigned char)(v >> 8);
	b[2] = (unsigned char)(v >> 16);
	b[3] = (unsigned char)(v >> 24);
}

/* send_status writes the 20-byte status of internal/plan/status.go. */
static int send_status(const struct status *st)
{
	unsigned char b[20];

	put32(b, st->kind);
	put32(b + 4, (uint32_t)st->op);
	put32(b + 8, (uint32_t)st->err);
	put32(b + 12, (uint32_t)st->exit_code);
	put32(b + 16, (uint32_t)st->sig);
	return write_all(CONTROL_FD, b, sizeof b) ? -1 : 0;
}

int64_t boot_sec;

int main(int argc, char **argv)
{
	struct timespec boot;

	unsigned char hdr[4];
	unsigned char *buf;
	uint32_t len;
	struct plan p = {0, NULL};
	struct status st = {ST_RAN, 0, 0, 0, 0};

	if (argc == 2 && strcmp(argv[1], "--protocol-version") == 0) {
		printf("%d\n", PLAN_VERSION);
		return 0;
	}
	clock_gettime(CLOCK_BOOTTIME, &boot); /* a valid clock: cannot fail */
	/* Run through /proc/self/fd/N, the kernel names the process "N";
	 * ps, the sandbox's own /proc/1/comm and the tests know it by name.
	 * A name too long is cut, never refused: this cannot fail. */
	prctl(PR_SET_NAME, "warden-exec", 0, 0, 0);
	/* The program may share this process's uid (rootless) and must not
	 * read its memory or descriptors through /proc/1. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return EXIT_REFUSED;
	/* An ignored SIGCHLD makes the kernel reap children itself, and
	 * the program's status would be lost to wait4's ECHILD. */
	if (signal(SIGCHLD, SIG_DFL) == SIG_ERR)
		return EXIT_REFUSED;
	if (receive(hdr, sizeof hdr) < 0)
		return EXIT_NO_HOST;
	/* The host's hello, not a plan's length (it reads as more than
	 * PLAN_MAX_BYTES): warden-exec was started in the host's namespaces
	 * (warden run's own start) and makes the sandbox's, going on as its
	 * PID 1 (unshare.c), whose plan follows. The spawner still clones
	 * warden-exec straight into them, as PID 1, and sends the plan. */
	if (memcmp(hdr, HELLO_TAG, sizeof hdr) == 0) {
		become_pid1();
		clock_gettime(CLOCK_BOOTTIME, &boot);
		if (receive(hdr, sizeof hdr) < 0)
			return EXIT_NO_HOST;
	}
	boot_sec = boot.tv_sec;
	len = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 24;
	if (len > PLAN_MAX_BYTES) {
		st.kind = ST_REFUSED;
		st.op = -1;
		return send_status(&st) < 0 ? EXIT_NO_HOST : EXIT_REFUSED;
	}
	buf = malloc(len ? len : 1);
	if (!buf)
		return EXIT_REFUSED;
	if (receive(buf, len) < 0)
		return EXIT_NO_HOST;
	if (plan_decode(buf, len, &p, &st.op) < 0) {
		st.kind = ST_REFUSED;
		return send_status(&st) < 0 ? EXIT_NO_HOST : EXIT_REFUSED;
	}
	free(buf);
	run_plan(&p, &st);
	return send_status(&st) < 0 ? EXIT_NO_HOST : 0;
}
