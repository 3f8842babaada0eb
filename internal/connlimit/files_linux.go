package connlimit

import (
	"fmt"
	"syscall"
)

// raiseFileLimit raises RLIMIT_NOFILE's soft limit to its hard limit and
// returns the soft limit now in force (Go's runtime usually has raised it
// already at start). When raising fails it returns the error with the
// soft limit that stands, which is then what counts.
func raiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("getting RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur < lim.Max {
		raised := syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			return lim.Cur, fmt.Errorf("raising RLIMIT_NOFILE from %d to %d: %w", lim.Cur, lim.Max, err)
		}
		lim = raised
	}
	return lim.Cur, nil
}
