/* Making the sandbox's namespaces. The host starts warden-exec in its own
 * namespaces (a vfork: cloning a Go process into a new user namespace
 * would copy its page tables), and this process, "stage 0", makes them:
 * it unshares its user namespace, has the host write the id maps, unshares
 * the others and forks PID 1 into the new PID namespace with CLONE_PARENT,
 * so PID 1 is the host's child, whose pid the host learns here and whose
 * end it reaps as before. Stage 0 applies no plan op, and ends at once.
 * The messages are internal/plan/unshare.go's (docs/protocol.md). */
#define _GNU_SOURCE
#include "exec.h"

#include <errno.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The namespaces stage 0 may be asked to unshare after its user
 * namespace (internal/native's namespaces), and those it must be: a
 * MAPPED message outside them is refused, not obeyed. */
#define NS_ALLOWED (CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)
#define NS_REQUIRED (CLONE_NEWNS | CLONE_NEWPID)

static uint32_t get32(const unsigned char *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t get64(const unsigned char *b)
{
	return (uint64_t)get32(b) | (uint64_t)get32(b + 4) << 32;
}

int receive(unsigned char *b, size_t n)
{
	while (n > 0) {
		struct pollfd p = {CONTROL_FD, POLLIN, 0};
		ssize_t r;
		int k = poll(&p, 1, HOST_WAIT_MS);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		r = read(CONTROL_FD, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

/* say sends the host one message: tag, a and b. */
static int say(const char *tag, uint32_t a, uint32_t b)
{
	unsigned char m[MSG_BYTES];

	memcpy(m, tag, 4);
	for (int k = 0; k < 4; k++) {
		m[4 + k] = (unsigned char)(a >> (8 * k));
		m[8 + k] = (unsigned char)(b >> (8 * k));
	}
	return write_all(CONTROL_FD, m, sizeof m) ? -1 : 0;
}

/* failed tells the host that step failed with err, and ends stage 0. */
static void failed(uint32_t step, int err)
{
	say(FAILED_TAG, step, (uint32_t)err);
	_exit(EXIT_REFUSED);
}

/* hold_caps gives this process exactly the capabilities of mask,
 * permitted, effective, inheritable and ambient: what the host's clone
 * with ambient capabilities gave the executor before it made its own
 * namespaces, where unshare gives it all of them. */
static int hold_caps(uint64_t mask)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];

	memset(data, 0, sizeof data);
	for (int k = 0; k < 2; k++)
		data[k].permitted = data[k].effective = data[k].inheritable = (uint32_t)(mask >> (32 * k));
	if (syscall(SYS_capset, &hdr, data) < 0)
		return errno;
	for (int c = 0; c < 64; c++)
		if ((mask >> c & 1) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0) < 0)
			return errno;
	return 0;
}

void become_pid1(void)
{
	unsigned char m[20];
	uint64_t flags, caps;
	long pid;

	/* the hello's tag is read (main.c): its version follows */
	if (receive(m, 4) < 0)
		_exit(EXIT_NO_HOST);
	if (get32(m) != PLAN_VERSION)
		failed(STEP_HELLO, EPROTO);
	/* Rootless, dumpable again (main made it not) until PID 1 exists:
	 * a host without CAP_DAC_OVERRIDE may open this process's
	 * /proc/PID/uid_map only so. No sandbox process exists yet, and
	 * PID 1 is made not dumpable. A root host needs none of it. */
	if (getuid() != 0 && prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		failed(STEP_USERNS, errno);
	if (unshare(CLONE_NEWUSER) < 0)
		failed(STEP_USERNS, errno);
	if (say(USERNS_TAG, 0, 0) < 0 || receive(m, sizeof m) < 0)
		_exit(EXIT_NO_HOST);
	flags = get64(m + 4);
	caps = get64(m + 12);
	if (memcmp(m, MAPPED_TAG, 4) != 0 || (flags & ~(uint64_t)NS_ALLOWED) != 0 ||
	    (flags & NS_REQUIRED) != NS_REQUIRED)
		failed(STEP_MAPPED, EPROTO);
	if (unshare((int)flags) < 0)
		failed(STEP_NAMESPACES, errno);
	if ((errno = hold_caps(caps)) != 0)
		failed(STEP_CAPS, errno);
	pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
	if (pid < 0)
		failed(STEP_CLONE, errno);
	if (pid == 0) {
		/* PID 1's parent is the host's thread, as when the host cloned
		 * it: a host gone before this finds the control socket closed
		 * (DieWithHost). */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || no_dump() != 0)
			_exit(EXIT_REFUSED);
		return;
	}
	/* A host that does not hear of PID 1 cannot end it: this does. */
	if (say(PID_TAG, (uint32_t)pid, 0) < 0) {
		kill((pid_t)pid, SIGKILL);
		_exit(EXIT_NO_HOST);
	}
	_exit(0);
}
