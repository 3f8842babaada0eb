package nsinit

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ownClock gives the sandbox a time namespace whose monotonic and boot
// clocks start at zero, so /proc/uptime, the start times in
// /proc/PID/stat and CLOCK_MONOTONIC and CLOCK_BOOTTIME count from the
// sandbox's start instead of telling the host's uptime. The wall clock is
// the host's. Only the processes the init forks enter the namespace (the
// kernel's time namespace is "for children"), and its offsets are set
// through /proc/self, which is this thread's because the init runs on the
// process's main thread.
func ownClock(*Config) error {
	if os.Getpid() != unix.Gettid() {
		return fmt.Errorf("the init runs on thread %d, not the main thread %d, whose offsets /proc/self sets", unix.Gettid(), os.Getpid())
	}
	if err := unix.Unshare(unix.CLONE_NEWTIME); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	var mono, boot unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono); err != nil {
		return err
	}
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot); err != nil {
		return err
	}
	// Whole seconds back: the clocks read a fraction of a second at start,
	// never less than zero, which the kernel refuses.
	offsets := fmt.Sprintf("monotonic %d 0\nboottime %d 0\n", -mono.Sec, -boot.Sec)
	return writeOwnProc("timens_offsets", offsets)
}

// writeOwnProc writes one of the init's own /proc files. A process that
// is not dumpable has them owned by the host's root, which a rootless
// init is not, so it is dumpable for the write: nothing else runs in the
// sandbox yet to read the init's memory meanwhile.
func writeOwnProc(name, content string) error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("making the init dumpable: %w", err)
	}
	err := os.WriteFile("/proc/self/"+name, []byte(content), 0)
	if e := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); e != nil {
		return fmt.Errorf("making the init not dumpable again: %w", e)
	}
	if err != nil {
		return fmt.Errorf("writing /proc/self/%s: %w", name, err)
	}
	return nil
}
