/* ignore_reserved execs its arguments with signals 32 and 33 ignored,
 * which the C library's signal(2) cannot do (it reserves them): how a
 * parent may hand warden-exec dispositions it must still reset
 * (TestExecutorSignalDefaultsReserved). */
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct {
		void (*handler)(int);
		unsigned long flags;
		void (*restorer)(void);
		uint64_t mask;
	} ign = {SIG_IGN, 0, NULL, 0};

	if (argc < 2 || syscall(SYS_rt_sigaction, 32, &ign, NULL, sizeof ign.mask) < 0 ||
	    syscall(SYS_rt_sigaction, 33, &ign, NULL, sizeof ign.mask) < 0)
		return 125;
	execv(argv[1], argv + 1);
	return 127;
}
