package boxname

import (
	"fmt"
	"strconv"
	"strings"
)

// Owner identifies a Warden process beyond its pid, for things a daemon
// shared with other Wardens holds (docker containers): the boot it runs
// in, its pid namespace, its pid there and its start time there. A pid
// alone is ambiguous: another pid namespace has the same pids, and a pid
// is reused once its process dies.
type Owner struct {
	// Boot is the kernel's boot id (/proc/sys/kernel/random/boot_id).
	Boot string
	// PidNS is the inode of the owner's pid namespace (/proc/self/ns/pid).
	PidNS uint64
	// PID is the owner's pid in that namespace.
	PID int
	// Start is the owner's start time in clock ticks after boot
	// (/proc/<pid>/stat field 22), which tells a reused pid apart.
	Start uint64
}

// String is the owner as a label value: boot:pidns:pid:start.
func (o Owner) String() string {
	return fmt.Sprintf("%s:%d:%d:%d", o.Boot, o.PidNS, o.PID, o.Start)
}

// ParseOwner reads back what Owner.String wrote, and false for anything
// else (another program's label, an older Warden's bare pid), which the
// sweeps then never judge.
func ParseOwner(s string) (Owner, bool) {
	f := strings.Split(s, ":")
	if len(f) != 4 || f[0] == "" {
		return Owner{}, false
	}
	ns, err1 := strconv.ParseUint(f[1], 10, 64)
	pid, ok := parsePID(f[2])
	start, err2 := strconv.ParseUint(f[3], 10, 64)
	if err1 != nil || err2 != nil || !ok {
		return Owner{}, false
	}
	return Owner{Boot: f[0], PidNS: ns, PID: pid, Start: start}, true
}

// Verdict is how a sweep judges what an Owner left.
type Verdict int

const (
	// OwnerLive: the owner runs, so what it holds stays.
	OwnerLive Verdict = iota
	// OwnerDead: the owner is gone, so what it left may be removed.
	OwnerDead
	// OwnerForeign: the owner is in another pid namespace on this boot (or
	// its label is unreadable), where this Warden cannot tell whether it
	// runs, so it is never swept; doctor --leaks lists it as not judged.
	OwnerForeign
)

// judge decides o's verdict for a Warden whose own identity is self;
// start reads a pid's start time in self's namespace and reports whether
// the pid is gone.
func judge(self, o Owner, start func(pid int) (uint64, bool, error)) Verdict {
	switch {
	case o.PID <= 0:
		return OwnerForeign
	case o.Boot != self.Boot:
		return OwnerDead // every process of another boot is gone
	case o.PidNS != self.PidNS:
		return OwnerForeign
	case o == self:
		return OwnerLive
	}
	t, gone, err := start(o.PID)
	switch {
	case gone:
		return OwnerDead
	case err != nil:
		return OwnerLive // cannot tell: keep it
	case t != o.Start:
		return OwnerDead // the pid was reused by another process
	}
	return OwnerLive
}
