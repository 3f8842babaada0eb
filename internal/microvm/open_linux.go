package microvm

import (
	"fmt"
	"os"
	"os/exec"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// openQEMU opens the QEMU binary under nsinit's trust rule: only root or
// this user can change what it runs, and the descriptor checked is the
// file executed.
func (l *launch) openQEMU() error {
	p := l.cfg.QEMU
	if p == "" {
		var err error
		if p, err = exec.LookPath("qemu-system-x86_64"); err != nil {
			return fmt.Errorf("microvm: qemu-system-x86_64 not found: apt-get install qemu-system-x86")
		}
	}
	f, err := nsinit.OpenTrusted(p)
	if err != nil {
		return fmt.Errorf("microvm: QEMU: %w", err)
	}
	l.qemu = f
	return nil
}

// openKernel opens the guest kernel under nsinit's trust rule (whoever
// could change it could run code as QEMU), readable by QEMU's own uid; a
// KernelFile the caller checked is copied instead, still world-readable.
// QEMU's root binds the file this descriptor is (rootMounts).
func openKernel(cfg Config) (*os.File, error) {
	if cfg.KernelFile != nil {
		return copyGuestFile(cfg.KernelFile, "guest kernel")
	}
	f, err := openGuestFile(cfg.Kernel, "guest kernel")
	if err != nil {
		return nil, fmt.Errorf("%w (build one with `make microvm-kernel`)", err)
	}
	return f, nil
}

// openInitrd opens an initrd on disk (InitrdPath) as a guest file, or
// copies the caller's descriptor (InitrdFile); nil when the initrd is
// given as bytes, which are written into QEMU's root instead.
func openInitrd(cfg Config) (*os.File, error) {
	switch {
	case cfg.InitrdFile != nil:
		return copyGuestFile(cfg.InitrdFile, "initrd")
	case cfg.InitrdPath != "":
		return openGuestFile(cfg.InitrdPath, "initrd")
	}
	return nil, nil
}

// copyGuestFile duplicates a descriptor the caller opened and checked of
// a file QEMU loads into the guest (what), which must be a
// world-readable regular file, so that the launcher owns and closes its
// own copy.
func copyGuestFile(f *os.File, what string) (*os.File, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("microvm: %s: %w", what, err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o004 == 0 {
		return nil, fmt.Errorf("microvm: %s %s is not a world-readable regular file, which QEMU (under its own uid) must read", what, f.Name())
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("microvm: copying the %s's descriptor: %w", what, err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// openGuestFile opens a file QEMU loads into the guest: trusted as a
// binary would be (root's or this user's, in such a directory, writable by
// no one else, no symlink, checked on the descriptor QEMU gets) and
// world-readable, since QEMU, under its own uid, opens the bind of it in
// its root.
func openGuestFile(p, what string) (*os.File, error) {
	f, err := nsinit.OpenTrustedData(p)
	if err != nil {
		return nil, fmt.Errorf("microvm: %s: %w", what, err)
	}
	st, err := f.Stat()
	switch {
	case err != nil:
		closeLogged(f, what)
		return nil, fmt.Errorf("microvm: %s: %w", what, err)
	case st.Mode().Perm()&0o004 == 0:
		closeLogged(f, what)
		return nil, fmt.Errorf("microvm: %s %s is not world-readable, so QEMU (under its own uid) cannot read it: chmod o+r it", what, p)
	}
	return f, nil
}

// socketPair makes the agent port's connection: QEMU takes its end as a
// connected chardev socket (-chardev socket,fd=N).
func socketPair() (host, guest *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("microvm: socketpair for the agent port: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "agent-host"), os.NewFile(uintptr(fds[1]), "agent-guest"), nil
}
