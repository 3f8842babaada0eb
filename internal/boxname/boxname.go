// Package boxname names what Warden makes for a sandbox (cgroups, box
// state directories, runsc and docker containers) after the pid of the
// Warden that made it, and finds what Wardens that died left behind under
// those names. Every backend and the cgroup code share it, so a leftover
// of any of them is told from a live Warden's the same way, and
// `warden doctor --leaks` lists exactly what the next Warden removes.
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
	if !ok || rest == "" || pidPart == "" || pidPart[0] == '0' || pidPart[0] == '+' {
		return 0, false
	}
	pid, err := strconv.Atoi(pidPart)
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// Dead says whether the Warden of pid is gone: not this process and not
// alive (in this pid namespace), so what it left may be removed.
func Dead(pid int) bool { return pid != os.Getpid() && !Alive(pid) }
