package microvm

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// QEMUVersion is the first line of `qemu-system-x86_64 --version` (qemu
// is Config.QEMU: "" looks it up on PATH), run as Start runs QEMU: the
// trusted binary by its descriptor, an empty environment, and, as root,
// as nobody with no groups. It answers within 10 s.
func QEMUVersion(ctx context.Context, qemu string) (string, error) {
	l := &launch{cfg: Config{QEMU: qemu}}
	if err := l.openQEMU(); err != nil {
		return "", err
	}
	defer closeLogged(l.qemu, "QEMU")
	fd, err := unix.FcntlInt(l.qemu.Fd(), unix.F_DUPFD_CLOEXEC, nsinit.ExecFDMin)
	if err != nil {
		return "", fmt.Errorf("microvm: duplicating QEMU's descriptor: %w", err)
	}
	defer func() { warn("closing QEMU's descriptor", unix.Close(fd)) }()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/fd/"+strconv.Itoa(fd), "--version")
	cmd.Args[0], cmd.Env, cmd.Dir = "qemu-system-x86_64", []string{}, "/"
	if unix.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("microvm: %s --version: %w", l.qemu.Name(), err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line), nil
}

// nobody is the uid and gid QEMUVersion runs QEMU as: it runs no guest, so
// needs no identity of its own.
const nobody = 65534
