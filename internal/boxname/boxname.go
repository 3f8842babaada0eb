// Package boxname names what Warden makes for a sandbox (cgroups, box
// state directories, runsc and docker containers) after the pid of the
// Warden that made it, and finds what Wardens that died left behind under
// those names. Every backend and the cgroup code share it, so a leftover
// of any of them is told from a live Warden's the same way, and
// `warden doctor --leaks` lists exactly what the next Warden removes.
//
// Names carry only the owner's pid (New), and a sweep removes what a pid
// that is gone in its own pid namespace left (Dead). That holds for cgroups
// and state directories: root's, on this host, and Wardens in different pid
// namespaces must use different ones (a container's own /run and cgroup
// namespace). A pid reused after a crash only delays a sweep until that
// process ends. A docker daemon, though, is shared by every Warden that
// reaches its socket (one on the host, one in a container given the
// socket), so containers carry a fuller Owner in their label: the boot id,
// the pid namespace's inode, the pid and its start time. A container is
// swept only when its owner is from an earlier boot, or from this boot and
// pid namespace with its pid gone or started at another time (reused);
// one from another pid namespace is never swept (Judge says OwnerForeign), as
// this Warden cannot see whether its owner runs. The boot id suffices to
// tell hosts apart because the daemon must be local: boxes bind the host's
// state directories.
package boxname

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
)

// Prefix starts every box's name Warden gives a runtime (runsc container
// ids, docker container names), so leftovers are recognised as Warden's.
const Prefix = "warden-"

// New returns a fresh name, <pid>-<16 hex digits>, owned by this process:
// OwnerPID reads the pid back, so a dead owner's leftovers can be found.
func New() string {
	var b [8]byte
	// crypto/rand.Read never fails on Linux (getrandom); it panics rather
	// than return short on the platforms where it could.
	_, _ = rand.Read(b[:])
	return strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// Box is a fresh name for a box a runtime runs: Prefix and New.
func Box() string { return Prefix + New() }

// OwnerPID returns the pid that a name made by New starts with, and false
// for names Warden did not make (which the sweeps then leave alone).
func OwnerPID(name string) (int, bool) {
	pidPart, rest, ok := strings.Cut(name, "-")
	if !ok || rest == "" {
		return 0, false
	}
	return parsePID(pidPart)
}

// parsePID is the one reading of a pid in a name or label: a positive
// decimal with no sign and no leading zero, as strconv.Itoa writes it.
func parsePID(s string) (int, bool) {
	if s == "" || s[0] == '0' || s[0] == '+' || s[0] == '-' {
		return 0, false
	}
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// Dead says whether the Warden of pid is gone: a real pid, not this
// process and not alive (in this pid namespace), so what it left may be
// removed. Names carry only the pid, which suffices for what they name:
// cgroups and state directories are root's, on this host, and each pid
// namespace's Wardens need their own (see the package doc).
func Dead(pid int) bool { return pid > 0 && pid != os.Getpid() && !Alive(pid) }
