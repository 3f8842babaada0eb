package vmguest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// cgroupDir is where the guest init mounts cgroup v2, in the initramfs's
// own /sys, out of the box's sight once it switches root.
const cgroupDir = "/sys/fs/cgroup"

// boxCgroup is the cgroup, below cgroupDir, the agent and every process
// of the box run in.
const boxCgroup = "box"

// mountCgroup mounts cgroup v2 at cgroupDir for limitBox.
func mountCgroup() error {
	return mount("cgroup2", cgroupDir, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC)
}

// limitBox makes the box's cgroup below root (a cgroup v2 directory:
// cgroupDir in the guest, a test's cgroup on a host) with memory.max
// limit, moves this process (PID 1, the agent to be) into it, so
// everything it forks is born there, and returns its memory.events, open,
// for the agent to read the OOM kills the host cannot see
// (nsinit.MemoryEventsFD). It reads memory.max back and fails unless it
// holds limit: every boot checks the one number the box's memory rests
// on. PID 1 is never the OOM killer's victim, and the agent's children
// start with oom_score_adj 1000: the limit kills the code, never the
// session, as on native, whose init shares its box's cgroup too.
func limitBox(root string, limit int64) (*os.File, error) {
	if err := writeCgroup(root, "cgroup.subtree_control", "+memory"); err != nil {
		return nil, err
	}
	if err := os.Mkdir(filepath.Join(root, boxCgroup), 0o755); err != nil {
		return nil, fmt.Errorf("making the box's cgroup: %w", err)
	}
	maxFile := filepath.Join(boxCgroup, "memory.max")
	if err := writeCgroup(root, maxFile, strconv.FormatInt(limit, 10)); err != nil {
		return nil, err
	}
	if err := checkLimit(filepath.Join(root, maxFile), limit); err != nil {
		return nil, err
	}
	if err := writeCgroup(root, filepath.Join(boxCgroup, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(root, boxCgroup, "memory.events"))
	if err != nil {
		return nil, fmt.Errorf("opening the box's memory.events: %w", err)
	}
	return f, nil
}

// checkLimit fails unless the memory.max file p holds limit, which the
// kernel keeps in whole pages (rounded down).
func checkLimit(p string, limit int64) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("reading the box's memory.max back: %w", err)
	}
	want := limit &^ int64(os.Getpagesize()-1)
	if got := strings.TrimSpace(string(b)); got != strconv.FormatInt(want, 10) {
		return fmt.Errorf("the box's memory.max is %q after writing %d: the guest kernel did not take the limit", got, limit)
	}
	return nil
}

// writeCgroup writes v to the file name below the cgroup directory root.
func writeCgroup(root, name, v string) error {
	if err := os.WriteFile(filepath.Join(root, name), []byte(v), 0); err != nil {
		return fmt.Errorf("writing %q to the guest's cgroup file %s: %w", v, name, err)
	}
	return nil
}

// passMemoryEvents leaves f open at nsinit.MemoryEventsFD across the
// agent's exec (the agent makes it close-on-exec again at once).
func passMemoryEvents(f *os.File) error {
	fd := int(f.Fd())
	var err error
	if fd == nsinit.MemoryEventsFD {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0)
	} else {
		err = unix.Dup3(fd, nsinit.MemoryEventsFD, 0)
	}
	if err != nil {
		return fmt.Errorf("passing the box's memory.events to the agent: %w", err)
	}
	return nil
}
