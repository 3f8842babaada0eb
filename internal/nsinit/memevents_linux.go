package nsinit

import (
	"bytes"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// memoryEvents is the box's memory.events (MemoryEventsFD) once setup
// has checked it, or -1: the agent then reports no OOM kills.
var memoryEvents = -1

// openMemoryEvents takes MemoryEventsFD for a Config with MemoryEvents
// (takeMemoryEvents).
func openMemoryEvents(cfg *Config) error {
	if !cfg.MemoryEvents {
		return nil
	}
	if err := takeMemoryEvents(MemoryEventsFD); err != nil {
		return err
	}
	memoryEvents = MemoryEventsFD
	return nil
}

// takeMemoryEvents checks that fd is open on a cgroup v2 file (the guest
// init's memory.events) with an oom_kill count, and makes it
// close-on-exec, so no process the agent forks inherits it.
func takeMemoryEvents(fd int) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return fmt.Errorf("the box's memory.events at descriptor %d: %w (the guest init opens it before it becomes the agent)", fd, err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return fmt.Errorf("descriptor %d is not a cgroup v2 file (file system 0x%x), so not the box's memory.events", fd, st.Type)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return fmt.Errorf("making the box's memory.events close-on-exec: %w", err)
	}
	_, err := readOOMKills(fd)
	return err
}

// boxOOMKills is the box cgroup's OOM kills so far, or 0 where the agent
// has no memory.events or could not read it (the host then counts no
// kill rather than a false one: see Event.OOMKills).
func boxOOMKills() uint64 {
	if memoryEvents < 0 {
		return 0
	}
	n, err := readOOMKills(memoryEvents)
	if err != nil {
		return 0
	}
	return n
}

// readOOMKills reads the oom_kill count from the memory.events open at fd.
func readOOMKills(fd int) (uint64, error) {
	var buf [512]byte
	n, err := unix.Pread(fd, buf[:], 0)
	if err != nil {
		return 0, fmt.Errorf("reading the box's memory.events: %w", err)
	}
	return parseOOMKills(buf[:n])
}

// parseOOMKills finds the "oom_kill N" line of a memory.events file.
func parseOOMKills(b []byte) (uint64, error) {
	for _, line := range bytes.Split(b, []byte("\n")) {
		key, val, ok := bytes.Cut(line, []byte(" "))
		if !ok || string(key) != "oom_kill" {
			continue
		}
		n, err := strconv.ParseUint(string(val), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("memory.events' oom_kill %q: %w", val, err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("memory.events has no oom_kill line (%d bytes)", len(b))
}
