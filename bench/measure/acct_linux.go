package measure

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cpuacctMount is where cgroup v1's cpuacct controller is mounted.
const cpuacctMount = "/sys/fs/cgroup/cpuacct"

// AcctGroup is a cpuacct cgroup (v1) of one server's own, so that the
// CPU it and its sandboxes used can be read whole, including sandboxes
// already gone: v1 charges CPU to every ancestor, and the server puts its
// sandboxes under <its cgroup>/warden. Other servers on the host (other
// benchmarks, tests) have sandboxes of their own elsewhere.
type AcctGroup struct {
	dir, home string
}

// NewAcctGroup makes a cpuacct cgroup named name beside this process's.
func NewAcctGroup(name string) (*AcctGroup, error) {
	home, err := ownCPUAcct()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(home, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("making cgroup %s: %w", dir, err)
	}
	return &AcctGroup{dir: dir, home: home}, nil
}

// ownCPUAcct is this process's cpuacct cgroup directory.
func ownCPUAcct() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && strings.Contains(","+f[1]+",", ",cpuacct,") {
			return filepath.Join(cpuacctMount, f[2]), nil
		}
	}
	return "", errors.New("no cpuacct cgroup (v1) for this process")
}

// Enter runs f (which starts the server) with this process in g, so
// what f starts is born there, then moves this process back. What this
// process itself spends meanwhile is charged to g too: read g's figures
// as differences taken after Enter returns.
func (g *AcctGroup) Enter(f func() error) error {
	pid := []byte(strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(filepath.Join(g.dir, "cgroup.procs"), pid, 0); err != nil {
		return fmt.Errorf("moving the benchmark into %s: %w", g.dir, err)
	}
	ferr := f()
	if err := os.WriteFile(filepath.Join(g.home, "cgroup.procs"), pid, 0); err != nil {
		return errors.Join(ferr, fmt.Errorf("moving the benchmark back to %s: %w", g.home, err))
	}
	return ferr
}

// Sandboxes is the CPU, in seconds, that the sandboxes of the server
// started in g have used so far (0 before its first).
func (g *AcctGroup) Sandboxes() float64 {
	s, err := usage(filepath.Join(g.dir, "warden"))
	if err != nil {
		return 0
	}
	return s
}

// Total is the CPU, in seconds, that everything started in g has used so
// far: the server, its helpers and its sandboxes.
func (g *AcctGroup) Total() (float64, error) { return usage(g.dir) }

// usage reads the cpuacct.usage of the cgroup dir, in seconds.
func usage(dir string) (float64, error) {
	p := filepath.Join(dir, "cpuacct.usage")
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", p, err)
	}
	return ns / 1e9, nil
}

// Remove removes g once its server has stopped (and the cgroups it
// left, which hold no process).
func (g *AcctGroup) Remove() {
	left, _ := filepath.Glob(filepath.Join(g.dir, "warden", "*", "cgroup.procs"))
	for _, p := range left {
		if err := os.Remove(filepath.Dir(p)); err != nil {
			log.Printf("removing a cgroup the server left: %v", err)
		}
	}
	for _, d := range []string{filepath.Join(g.dir, "warden"), g.dir} {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Printf("removing cgroup %s: %v", d, err)
		}
	}
}
