package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// expectedExecutorDiffs are the fields the two executors may show
// differently, each with why; any other difference fails the test.
var expectedExecutorDiffs = map[string]string{
	"Procs/1/comm": "PID 1 is the init, warden-init (Go) or warden-exec (C): its name is the executor's",
}

// fieldDiff is one field whose normalised values differ.
type fieldDiff struct {
	field string
	a, b  string
}

// diffReports lists the fields of a and b that differ, in field order;
// a field only one side has is a difference too.
func diffReports(a, b map[string]string) []fieldDiff {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var d []fieldDiff
	for _, k := range keys {
		va, oka := a[k]
		vb, okb := b[k]
		if !oka {
			va = "<absent>"
		}
		if !okb {
			vb = "<absent>"
		}
		if va != vb || oka != okb {
			d = append(d, fieldDiff{k, va, vb})
		}
	}
	return d
}

// normalise flattens a probe report to field path -> value, with the
// figures that differ per run or per boot replaced by what they stand
// for, so the same sandbox gives the same map twice.
func normalise(r probeOutput) map[string]string {
	m := map[string]string{}
	hostUID, hostGID := mappedHostID(str(r["UIDMap"])), mappedHostID(str(r["GIDMap"]))
	for k, v := range r {
		switch k {
		case "Mountinfo":
			mountinfo(m, str(v), hostUID, hostGID)
		case "Env":
			for _, kv := range list(v) {
				name, val, _ := strings.Cut(kv, "=")
				m["Env/"+name] = val
			}
		case "Procs":
			procTree(m, list(v), r)
		case "UIDMap", "GIDMap":
			m[k] = idMap(str(v))
		case "Status":
			status(m, v.(map[string]any), r)
		case "FDs", "Proc", "CgroupFiles", "Rlimits", "Syscalls", "Sysinfo", "Meminfo", "Statfs":
			for kk, vv := range v.(map[string]any) {
				m[k+"/"+kk] = perRun(str(vv))
			}
		default:
			m[k] = perRun(fmt.Sprint(v))
		}
	}
	// The init narrows its affinity to the CPU quota's count of CPUs
	// (--cpus, 1 by default) starting at the one it runs on, where the
	// scheduler put it: the count is the sandbox's, the numbers the
	// host's moment.
	m["Status/Cpus_allowed_list"] = "count " + strconv.Itoa(cpuCount(m["Status/Cpus_allowed_list"]))
	// The boot_id the view shows is made for each sandbox.
	if id := m["Proc//proc/sys/kernel/random/boot_id"]; len(id) == 37 {
		m["Proc//proc/sys/kernel/random/boot_id"] = "<a random uuid>"
	}
	return m
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func list(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, e := range l {
		out = append(out, str(e))
	}
	return out
}

// inodeRef matches the inode numbers of pipes, sockets and namespaces
// in a descriptor's link: new for every run.
var inodeRef = regexp.MustCompile(`^(pipe|socket|anon_inode|net|user|mnt|pid|uts|ipc|cgroup|time):\[[0-9]+\]$`)

// perRun replaces what is new for every run in one value.
func perRun(v string) string {
	return inodeRef.ReplaceAllString(v, "$1:[inode]")
}

// mappedHostID is the host id of an id map's first line: root leases a
// new one for every sandbox from the pool.
func mappedHostID(idmap string) string {
	f := strings.Fields(idmap)
	if len(f) < 3 {
		return ""
	}
	return f[1]
}

// idMap keeps each line's inside id and count; the host id is leased
// per run (see mappedHostID).
func idMap(idmap string) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(idmap), "\n") {
		if f := strings.Fields(l); len(f) == 3 {
			lines = append(lines, f[0]+" <host> "+f[2])
		} else {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// cpuCount counts the CPUs of a list such as "0-1,4".
func cpuCount(list string) int {
	n := 0
	for _, r := range strings.Split(list, ",") {
		lo, hi, ok := strings.Cut(r, "-")
		a, errA := strconv.Atoi(lo)
		if !ok {
			if errA == nil {
				n++
			}
			continue
		}
		if b, err := strconv.Atoi(hi); err == nil && errA == nil {
			n += b - a + 1
		}
	}
	return n
}

// propagationRef matches the peer group numbers of shared and slave
// mounts, which count host-wide.
var propagationRef = regexp.MustCompile(`^(shared|master|propagate_from):[0-9]+$`)

// initFD matches a descriptor of the init named in a mount's options (a
// template's /etc overlay takes its lower layer by /proc/self/fd/N):
// its number is whichever the init's runtime left free.
var initFD = regexp.MustCompile(`/proc/self/fd/[0-9]+`)

// procTree adds the process tree, every pid replaced by its rank in the
// list (see pidRanks), so the tree's shape, names and users are compared.
func procTree(m map[string]string, procs []string, r probeOutput) {
	rank := pidRanks(r)
	for _, p := range procs {
		f := strings.SplitN(p, " ", 4)
		for len(f) < 4 {
			f = append(f, "")
		}
		key := "Procs/" + rank(f[0])
		m[key+"/ppid"], m[key+"/comm"], m[key+"/uid"] = rank(f[1]), f[2], f[3]
	}
	m["Procs/count"] = strconv.Itoa(len(procs))
}

// pidRanks maps a pid of the sandbox to its rank among the processes
// the probe listed ("1" is PID 1, "0" the parent outside). The program's
// pid is not compared: the Go init's runtime threads take ids from the
// same namespace before the program is forked, as many as it happened
// to start, so the number differs between two runs of the Go init alone.
func pidRanks(r probeOutput) func(string) string {
	var pids []int
	for _, p := range list(r["Procs"]) {
		if n, err := strconv.Atoi(strings.SplitN(p, " ", 2)[0]); err == nil {
			pids = append(pids, n)
		}
	}
	slices.Sort(pids)
	return func(pid string) string {
		n, err := strconv.Atoi(pid)
		if err != nil || n <= 1 {
			return pid
		}
		if i := slices.Index(pids, n); i >= 0 {
			return "rank" + strconv.Itoa(i+1)
		}
		return "unlisted"
	}
}

// status adds /proc/self/status's fields, the pids among them by rank.
func status(m map[string]string, st map[string]any, r probeOutput) {
	rank := pidRanks(r)
	for k, v := range st {
		val := str(v)
		if k == "NSpid" || k == "NStgid" || k == "PPid" {
			val = rank(val)
		}
		m["Status/"+k] = val
	}
}

// mountinfo adds one field per mount, keyed by its mount point (and its
// rank where mounts stack): its parent by mount point, device (the
// anonymous minor numbers of tmpfs and proc are new per run), root,
// options, propagation, type, source and super options, with the
// sandbox's leased host ids named rather than numbered.
func mountinfo(m map[string]string, text, hostUID, hostGID string) {
	byID := map[string]string{}
	seen := map[string]int{}
	type mount struct{ key, parent, rest string }
	var mounts []mount
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(l)
		sep := slices.Index(f, "-")
		if len(f) < 10 || sep < 6 || sep+3 >= len(f) {
			m["Mountinfo/unparsed/"+strconv.Itoa(len(mounts))] = l
			continue
		}
		point := f[4]
		seen[point]++
		key := point
		if seen[point] > 1 {
			key += "#" + strconv.Itoa(seen[point])
		}
		byID[f[0]] = key
		dev := f[2]
		if strings.HasPrefix(dev, "0:") {
			dev = "0:anon"
		}
		var opt []string
		for _, o := range f[6:sep] {
			opt = append(opt, propagationRef.ReplaceAllString(o, "$1"))
		}
		super := strings.Split(f[sep+3], ",")
		for i, o := range super {
			switch {
			case hostUID != "" && o == "uid="+hostUID:
				super[i] = "uid=<host>"
			case hostGID != "" && o == "gid="+hostGID:
				super[i] = "gid=<host>"
			default:
				super[i] = initFD.ReplaceAllString(o, "/proc/self/fd/<fd>")
			}
		}
		rest := fmt.Sprintf("dev=%s root=%s opts=%s optional=%s type=%s source=%s super=%s",
			dev, f[3], f[5], strings.Join(opt, ","), f[sep+1], f[sep+2], strings.Join(super, ","))
		mounts = append(mounts, mount{key, f[1], rest})
	}
	for _, mt := range mounts {
		parent, ok := byID[mt.parent]
		if !ok {
			parent = "<outside>"
		}
		m["Mountinfo/"+mt.key] = "parent=" + parent + " " + mt.rest
	}
	m["Mountinfo/count"] = strconv.Itoa(len(mounts))
}
