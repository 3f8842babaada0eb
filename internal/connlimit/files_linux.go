package connlimit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
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

// ceiling is the most this process may raise its descriptor limit to,
// which is nofile (its hard limit, to which raiseFileLimit raised it)
// unless it runs as root, which may raise the hard limit up to
// fs.nr_open. A root process that cannot read fs.nr_open is given
// nofile, so the advice it gets never asks for more than it may have.
func ceiling(nofile uint64) uint64 {
	if os.Geteuid() != 0 {
		return nofile
	}
	b, err := os.ReadFile("/proc/sys/fs/nr_open")
	if err != nil {
		return nofile
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return nofile
	}
	return max(n, nofile)
}
