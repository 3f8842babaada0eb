package vmguest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// cgroupDir is where the guest init mounts cgroup v2, in the initramfs's
// own /sys, out of the box's sight once it switches root.
const cgroupDir = "/sys/fs/cgroup"

// boxCgroup is the cgroup, below cgroupDir, the agent and every process
// of the box run in.
const boxCgroup = "box"

// limitBox makes the box's cgroup with memory.max limit, moves this
// process (PID 1, the agent to be) into it, so everything it forks is
// born there, and returns its memory.events, open, for the agent to read
// the OOM kills the host cannot see (nsinit.MemoryEventsFD). PID 1 is
// never the OOM killer's victim, and the agent's children start with
// oom_score_adj 1000: the limit kills the code, never the session, as on
// native, whose init shares its box's cgroup too.
func limitBox(limit int64) (*os.File, error) {
	if err := mount("cgroup2", cgroupDir, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
		return nil, err
	}
	if err := writeCgroup("cgroup.subtree_control", "+memory"); err != nil {
		return nil, err
	}
	if err := os.Mkdir(filepath.Join(cgroupDir, boxCgroup), 0o755); err != nil {
		return nil, fmt.Errorf("making the box's cgroup: %w", err)
	}
	if err := writeCgroup(filepath.Join(boxCgroup, "memory.max"), strconv.FormatInt(limit, 10)); err != nil {
		return nil, err
	}
	if err := writeCgroup(filepath.Join(boxCgroup, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(cgroupDir, boxCgroup, "memory.events"))
	if err != nil {
		return nil, fmt.Errorf("opening the box's memory.events: %w", err)
	}
	return f, nil
}

// writeCgroup writes v to the file name below cgroupDir.
func writeCgroup(name, v string) error {
	if err := os.WriteFile(filepath.Join(cgroupDir, name), []byte(v), 0); err != nil {
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
