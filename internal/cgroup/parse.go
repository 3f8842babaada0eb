package cgroup

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// The kernel's cgroup files are small text files in a handful of formats. Each format has a
// parser over an io.Reader here, so the parsing is tested without root or a cgroup mount.

// parseKeyed parses a flat-keyed file ("key value" per line: v2 cpu.stat, memory.events, v1
// memory.oom_control). Lines that are not a key and an unsigned integer are skipped, since
// kernels add keys over time and a caller only asks for the ones it knows.
func parseKeyed(r io.Reader) (map[string]uint64, error) {
	out := make(map[string]uint64)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
		if err != nil {
			continue
		}
		out[key] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// oomControl is v1 memory.oom_control.
type oomControl struct {
	// KillDisable is true when the OOM killer is off: tasks then hang at the limit
	// instead of being killed, which Warden never wants.
	KillDisable bool
	// Kills counts OOM kills (Linux 4.13 and later; 0 before).
	Kills uint64
}

// parseOOMControl parses v1 memory.oom_control.
func parseOOMControl(r io.Reader) (oomControl, error) {
	kv, err := parseKeyed(r)
	if err != nil {
		return oomControl{}, err
	}
	return oomControl{
		KillDisable: kv["oom_kill_disable"] != 0,
		Kills:       kv["oom_kill"],
	}, nil
}

// parseMemoryEvents returns the oom_kill count of v2 memory.events.
func parseMemoryEvents(r io.Reader) (uint64, error) {
	kv, err := parseKeyed(r)
	if err != nil {
		return 0, err
	}
	return kv["oom_kill"], nil
}

// parseCPUStat returns usage_usec of v2 cpu.stat, which the kernel keeps for every cgroup
// whether or not the cpu controller is enabled.
func parseCPUStat(r io.Reader) (time.Duration, error) {
	kv, err := parseKeyed(r)
	if err != nil {
		return 0, err
	}
	usec, ok := kv["usage_usec"]
	if !ok {
		return 0, fmt.Errorf("no usage_usec in cpu.stat")
	}
	return usecToDuration(usec), nil
}

// usecToDuration converts without overflowing for absurd values.
func usecToDuration(usec uint64) time.Duration {
	if usec > math.MaxInt64/uint64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(usec) * time.Microsecond
}

// parseSingle parses a file holding one unsigned number (v1 cpuacct.usage, memory.*_in_bytes,
// v2 memory.peak, pids.max). "max" reads as math.MaxUint64.
func parseSingle(r io.Reader) (uint64, error) {
	b, err := io.ReadAll(io.LimitReader(r, 64))
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return math.MaxUint64, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing %q: %w", s, err)
	}
	return v, nil
}

// parsePids parses cgroup.procs: one pid per line.
func parsePids(r io.Reader) ([]int, error) {
	var pids []int
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		t := strings.TrimSpace(sc.Text())
		if t == "" {
			continue
		}
		pid, err := strconv.Atoi(t)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("parsing pid %q", t)
		}
		pids = append(pids, pid)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return pids, nil
}

// parseControllers parses v2 cgroup.controllers and cgroup.subtree_control: names separated by
// spaces.
func parseControllers(r io.Reader) (map[string]bool, error) {
	b, err := io.ReadAll(io.LimitReader(r, 4096))
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool)
	for _, f := range strings.Fields(string(b)) {
		out[f] = true
	}
	return out, nil
}

// procCgroup is /proc/<pid>/cgroup: the process's cgroup in each hierarchy.
type procCgroup struct {
	// V1 maps each v1 controller (and "name=systemd"-style named hierarchy) to a path.
	V1 map[string]string
	// V2 is the path in the unified hierarchy ("0::" line); HasV2 says if there was one.
	V2    string
	HasV2 bool
}

// parseProcCgroup parses /proc/<pid>/cgroup, lines "id:controller,controller:/path". It
// tells a v2 line of "/" from no v2 line at all.
func parseProcCgroup(r io.Reader) (procCgroup, error) {
	pc := procCgroup{V1: make(map[string]string)}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			return procCgroup{}, fmt.Errorf("parsing cgroup line %q", line)
		}
		if parts[0] == "0" && parts[1] == "" {
			pc.V2, pc.HasV2 = parts[2], true
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c != "" {
				pc.V1[c] = parts[2]
			}
		}
	}
	if err := sc.Err(); err != nil {
		return procCgroup{}, err
	}
	return pc, nil
}

// mount is one cgroup or cgroup2 line of /proc/self/mountinfo.
type mount struct {
	// Root is the cgroup this mount shows at its top (not "/" inside a container that
	// bind-mounts its own cgroup, or with a cgroup namespace made after the mount).
	Root string
	// Point is where it is mounted.
	Point string
	// V2 is true for the unified (cgroup2) hierarchy.
	V2 bool
	// Controllers are the v1 controllers of the hierarchy (from the super options); empty
	// for v2 and for named hierarchies like name=systemd.
	Controllers []string
}

// v1NonControllers are the super options of a v1 mount that are not controller names.
var v1NonControllers = map[string]bool{
	"rw": true, "ro": true, "noprefix": true, "clone_children": true, "xattr": true,
	"cpuset_v2_mode": true, "favordynmods": true,
}

// parseMountInfo returns the cgroup mounts of a /proc/<pid>/mountinfo, in order. The format
// (proc(5)) is: id parent major:minor root mountpoint options [optional...] - fstype source
// superoptions.
func parseMountInfo(r io.Reader) ([]mount, error) {
	var out []mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			return nil, fmt.Errorf("parsing mountinfo line %q", line)
		}
		if !strings.HasPrefix(post, "cgroup") {
			continue // most lines; this is read on the first New of every Warden process
		}
		after := strings.Fields(post)
		before := strings.Fields(pre)
		if len(after) < 3 || len(before) < 6 {
			return nil, fmt.Errorf("parsing mountinfo line %q", line)
		}
		var m mount
		switch after[0] {
		case "cgroup2":
			m.V2 = true
		case "cgroup":
			for _, o := range strings.Split(after[2], ",") {
				if !v1NonControllers[o] && !strings.Contains(o, "=") {
					m.Controllers = append(m.Controllers, o)
				}
			}
		default:
			continue
		}
		m.Root = unescapeMountInfo(before[3])
		m.Point = unescapeMountInfo(before[4])
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// unescapeMountInfo undoes the kernel's octal escapes (\040 for space, \011, \012, \134).
func unescapeMountInfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
