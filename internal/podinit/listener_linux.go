package podinit

import (
	"fmt"
	"log"
	"net"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/unixlisten"
)

// inheritedListener takes descriptor fd, which must be a listening unix
// stream socket (unixlisten.Check), as the pod mode's listener.
func inheritedListener(fd int) (net.Listener, error) {
	f := os.NewFile(uintptr(fd), fmt.Sprintf("inherited descriptor %d", fd))
	if err := unixlisten.Check(f); err != nil {
		if cerr := f.Close(); cerr != nil {
			log.Printf("closing the refused descriptor %d: %v", fd, cerr)
		}
		return nil, fmt.Errorf("--listen-fd: %w", err)
	}
	ln, err := net.FileListener(f)
	// FileListener holds a copy; the inherited number is not needed
	if cerr := f.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("using descriptor %d as the listener: %w", fd, err)
	}
	return ln, nil
}

// checkUnderWardenInit is checkPID1 for --in-warden-sandbox: the init
// runs as the program of a native Warden sandbox, whose PID namespace
// is the box's alone, and must be the direct child of its PID 1,
// Warden's own init (nsinit.Arg0) or warden-exec (nsinit.ExecName). Its
// killAll then signals only the session's processes (kill(-1) spares
// PID 1 and the caller), and it becomes the child subreaper so that
// the session's orphans reach it, not that PID 1. A Pod's container
// shares nothing of this: there the mode must stay PID 1.
//
// It is a guard against misuse (the flag given in a container under
// tini, say, where killAll would hit every process of the uid), not a
// security check: whoever creates a PID namespace can fake a PID 1 of
// that name. Nothing rests on it but the refusal of a mistake.
func checkUnderWardenInit() error {
	if os.Getppid() != 1 {
		return fmt.Errorf("--in-warden-sandbox: running as pid %d, a child of pid %d: the mode must be the program of a native Warden sandbox (a child of its PID 1); in a Pod drop the flag and run as PID 1", os.Getpid(), os.Getppid())
	}
	b, err := os.ReadFile("/proc/1/cmdline")
	if err != nil {
		return fmt.Errorf("--in-warden-sandbox: reading PID 1's command line: %w", err)
	}
	if err := wardenPID1(b); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("--in-warden-sandbox: becoming the child subreaper: %w", err)
	}
	return nil
}

// wardenPID1 refuses a PID 1 whose command line (/proc/1/cmdline) does
// not start with Warden's sandbox init's name (nsinit.Arg0 or
// nsinit.ExecName), exactly: checkUnderWardenInit's name check.
func wardenPID1(cmdline []byte) error {
	arg0, _, _ := strings.Cut(string(cmdline), "\x00")
	if arg0 != nsinit.Arg0 && arg0 != nsinit.ExecName {
		return fmt.Errorf("--in-warden-sandbox: PID 1 is %.40q, not Warden's sandbox init (%s or %s): in a Pod drop the flag and run as PID 1", arg0, nsinit.Arg0, nsinit.ExecName)
	}
	return nil
}
