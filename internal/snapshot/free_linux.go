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
