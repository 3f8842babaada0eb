package measure

import (
	"os"
	"slices"
	"strconv"
	"strings"
)

// engineComms are the Docker engine's processes (comm is cut to 15 bytes).
var engineComms = []string{"dockerd", "containerd", "containerd-shim"}

// Footprint is the PSS in bytes of root and all its descendants, with the
// Docker engine's processes and theirs when engine is set.
func Footprint(root int, engine bool) int64 {
	children := map[int][]int{}
	todo := []int{root}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		lp, rp := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
		if lp < 0 || rp < lp {
			continue
		}
		if engine && slices.Contains(engineComms, string(b[lp+1:rp])) {
			todo = append(todo, pid)
		}
		f := strings.Fields(string(b[rp+1:]))
		if len(f) > 1 {
			ppid, _ := strconv.Atoi(f[1])
			children[ppid] = append(children[ppid], pid)
		}
	}
	var total int64
	seen := map[int]bool{}
	for len(todo) > 0 {
		pid := todo[0]
		todo = append(todo[1:], children[pid]...)
		if !seen[pid] {
			seen[pid] = true
			total += PSS(pid)
		}
	}
	return total
}

// PSS reads a process's PSS from smaps_rollup.
func PSS(pid int) int64 {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}
