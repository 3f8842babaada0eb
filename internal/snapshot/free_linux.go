package snapshot

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// checkFree refuses a new snapshot when the state directory's disk has
// under ReservePercent of its blocks or inodes free, so snapshots cannot
// fill the disk the server's records and the host share. The refusal
// wraps ENOSPC, which callers answer as a full disk.
func (s *Store) checkFree() error {
	var st unix.Statfs_t
	if err := unix.Statfs(s.path, &st); err != nil {
		return fmt.Errorf("checking the free space of the snapshot directory: %w", err)
	}
	if low(st.Bavail, st.Blocks) {
		return fmt.Errorf("under %d%% of the state directory's disk is free: %w", ReservePercent, unix.ENOSPC)
	}
	if low(st.Ffree, st.Files) {
		return fmt.Errorf("under %d%% of the state directory's inodes are free: %w", ReservePercent, unix.ENOSPC)
	}
	return nil
}

// low says free is under ReservePercent of total; a file system that
// reports no total (some report no inodes) is never low.
func low(free, total uint64) bool {
	return total > 0 && free < total/100*ReservePercent
}

// Room says whether the state directory's disk has bytes free for a
// write of about that size (a box's memory image) beyond its reserve; a
// write that would fill it is refused before it starts, rather than
// failing half-way and taking the free space other snapshots need.
func (s *Store) Room(bytes int64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(s.path, &st); err != nil {
		return fmt.Errorf("checking the free space of the snapshot directory: %w", err)
	}
	free := st.Bavail * uint64(st.Bsize)
	reserve := st.Blocks / 100 * ReservePercent * uint64(st.Bsize)
	if bytes < 0 || free < reserve || free-reserve < uint64(bytes) {
		return fmt.Errorf("the state directory's disk has %d bytes free beyond its %d%% reserve, under the %d needed: %w", max(free, reserve)-reserve, ReservePercent, bytes, unix.ENOSPC)
	}
	return nil
}
