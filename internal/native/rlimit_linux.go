package native

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/spec"
)

// hardLimit is one rlimit the init sets to a limit the caller chose. The
// init inherits this process's hard limits (through the spawner too) and
// can only lower them: raising one takes CAP_SYS_RESOURCE in the host's
// own user namespace, which no sandbox has. So this process's hard limit,
// not fs.nr_open or the pids cgroup, is the real bound, and a limit above
// it is refused before anything is built rather than failing in the init.
type hardLimit struct {
	name     string // the limit, as spec's messages name it
	resource int
	rlimit   string // the resource's name
	ulimit   string // the shell's and systemd's ways to raise it
}

var (
	openFilesLimit = hardLimit{"open files", unix.RLIMIT_NOFILE, "RLIMIT_NOFILE", "ulimit -Hn, or LimitNOFILE= under systemd"}
	pidsLimit      = hardLimit{"pids", unix.RLIMIT_NPROC, "RLIMIT_NPROC", "ulimit -Hu, or LimitNPROC= under systemd"}
)

// checkHardLimits refuses a sandbox whose open files or pids the init
// could not set. nproc is the RLIMIT_NPROC the init gets for l.Pids.
func checkHardLimits(l spec.Limits, nproc uint64) error {
	if err := openFilesLimit.check(uint64(l.OpenFiles), uint64(l.OpenFiles)); err != nil {
		return err
	}
	return pidsLimit.check(uint64(l.Pids), nproc)
}

// check refuses want (which the init sets as set) above the hard limit.
func (h hardLimit) check(want, set uint64) error {
	var lim unix.Rlimit
	if set == 0 || unix.Getrlimit(h.resource, &lim) != nil || lim.Max == unix.RLIM_INFINITY || set <= lim.Max {
		return nil
	}
	most := uint64(0)
	if lim.Max > set-want {
		most = lim.Max - (set - want)
	}
	return fmt.Errorf("%w: %s %d is above %d, the hard %s this warden was started with, which no sandbox can raise: ask for at most %d, or start warden with a higher hard limit (%s)",
		spec.ErrInvalid, h.name, want, most, h.rlimit, most, h.ulimit)
}
