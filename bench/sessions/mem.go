package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// memAvailable is /proc/meminfo's MemAvailable in bytes.
func memAvailable() int64 {
	return meminfoField("/proc/meminfo", "MemAvailable:")
}

// childPSS sums the proportional set size of this process's children:
// the sessions' inits.
func childPSS() int64 {
	self := strconv.Itoa(os.Getpid())
	var total int64
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(fields) > 1 && fields[1] == self {
			total += meminfoField(filepath.Join(filepath.Dir(st), "smaps_rollup"), "Pss:")
		}
	}
	return total
}

// meminfoField reads a "Name: N kB" line.
func meminfoField(path, name string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), name); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
