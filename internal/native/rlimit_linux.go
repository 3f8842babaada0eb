package native

import (
	"fmt"
	"os"

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
// could not set under this process's hard limits. nproc is the
// RLIMIT_NPROC the init gets for l.Pids.
func checkHardLimits(l spec.Limits, nproc uint64) error {
	return checkUnder(l, nproc, openFilesLimit.hard(), pidsLimit.hard())
}

// checkUnder is checkHardLimits under the hard limits files and procs
// (RLIM_INFINITY for none).
func checkUnder(l spec.Limits, nproc, files, procs uint64) error {
	if err := openFilesLimit.check(uint64(l.OpenFiles), uint64(l.OpenFiles), files); err != nil {
		return err
	}
	return pidsLimit.check(uint64(l.Pids), nproc, procs)
}

// hard is this process's hard limit, RLIM_INFINITY if unknown.
func (h hardLimit) hard() uint64 {
	var lim unix.Rlimit
	if unix.Getrlimit(h.resource, &lim) != nil {
		return unix.RLIM_INFINITY
	}
	return lim.Max
}

// check refuses want (which the init sets as set) above the hard limit max.
func (h hardLimit) check(want, set, max uint64) error {
	if set == 0 || max == unix.RLIM_INFINITY || set <= max {
		return nil
	}
	most := uint64(0)
	if max > set-want {
		most = max - (set - want)
	}
	return fmt.Errorf("%w: %s %d is above %d, the hard %s this warden was started with, which no sandbox can raise: ask for at most %d, or start warden with a higher hard limit (%s)",
		spec.ErrInvalid, h.name, want, most, h.rlimit, most, h.ulimit)
}

// HardCeiling is the most of one limit any sandbox can be given, and
// where that bound comes from.
type HardCeiling struct {
	// Name is the limit as spec's messages name it ("open files").
	Name string
	// Value is the most a sandbox can be given.
	Value int64
	// Rlimit is the bound ("RLIMIT_NOFILE") and Raise how to raise it.
	Rlimit, Raise string
}

// HardCeilings are the bounds this process's hard rlimits put on every
// sandbox's open files and pids; an unbounded one is left out. Rootless,
// the init's own tasks count against RLIMIT_NPROC, so the pids bound is
// that much lower: a request for exactly it still fits.
func HardCeilings() []HardCeiling {
	return hardCeilings(openFilesLimit.hard(), pidsLimit.hard(), os.Geteuid() != 0)
}

func hardCeilings(files, procs uint64, rootless bool) []HardCeiling {
	var out []HardCeiling
	add := func(h hardLimit, v uint64, less uint64) {
		if v == unix.RLIM_INFINITY || v > 1<<62 {
			return
		}
		n := int64(0)
		if v > less {
			n = int64(v - less)
		}
		out = append(out, HardCeiling{Name: h.name, Value: n, Rlimit: h.rlimit, Raise: h.ulimit})
	}
	add(openFilesLimit, files, 0)
	tasks := uint64(0)
	if rootless {
		tasks = initTasks
	}
	add(pidsLimit, procs, tasks)
	return out
}
