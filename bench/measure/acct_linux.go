package measure

import (
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
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
// as differences taken after Enter returns. Should the way back fail,
// the error wraps ErrNotBack.
func (g *AcctGroup) Enter(f func() error) error {
	pid := []byte(strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(filepath.Join(g.dir, "cgroup.procs"), pid, 0); err != nil {
		return fmt.Errorf("moving the benchmark into %s: %w", g.dir, err)
	}
	ferr := f()
	if err := os.WriteFile(filepath.Join(g.home, "cgroup.procs"), pid, 0); err != nil {
		return errors.Join(ferr, fmt.Errorf("moving the benchmark back to %s: %w: %w", g.home, ErrNotBack, err))
	}
	return ferr
}

// Sandboxes is the CPU, in seconds, that the sandboxes of the server
// started in g have used so far (0 before its first, and 0, logged, when
// it cannot be read).
func (g *AcctGroup) Sandboxes() float64 {
	s, err := usage(filepath.Join(g.dir, "warden"))
	if errors.Is(err, fs.ErrNotExist) { // no sandbox yet
		return 0
	}
	if err != nil {
		log.Printf("the sandboxes' CPU in %s: %v", g.dir, err)
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

// Start starts cmd with its process born in g, and so everything it
// starts, even what outlives it (an orphan is still charged to g): cgroup v1
// moves single threads through the tasks file, and a child is born in the
// cgroup of the thread that forks it. The fork happens on a thread locked
// to a goroutine of its own, moved into g and back; should the way back
// fail, the thread stays locked to the goroutine as it exits, so Go ends
// it (or parks it for good, if it is the main thread) and runs no other
// work on it. That failure is logged, not returned: cmd has started, and
// its caller must wait for it.
func (g *AcctGroup) Start(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		tid := []byte(strconv.Itoa(syscall.Gettid()))
		if err := os.WriteFile(filepath.Join(g.dir, "tasks"), tid, 0); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("moving a thread into %s: %w", g.dir, err)
			return
		}
		err := cmd.Start()
		if berr := os.WriteFile(filepath.Join(g.home, "tasks"), tid, 0); berr != nil {
			// The child was born in g all the same: return cmd.Start's
			// own result, so that a started child is waited for.
			log.Printf("moving a thread back to %s (it ends with its goroutine): %v", g.home, berr)
			errc <- err
			return // still locked: the thread goes with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// Settle waits, up to limit, until no process is left in g or the
// cgroups under it, so that Total holds all of the CPU a finished command
// and what it left behind spent.
func (g *AcctGroup) Settle(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		left, err := g.procs()
		if err != nil || left == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes still in %s after %s", left, g.dir, limit)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// procs counts the processes in g and the cgroups under it.
func (g *AcctGroup) procs() (int, error) {
	n := 0
	err := filepath.WalkDir(g.dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) { // a cgroup removed as the walk went
			return nil
		}
		if err != nil || d.Name() != "cgroup.procs" {
			return err
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) { // its cgroup was just removed
			return nil
		}
		n += len(strings.Fields(string(b)))
		return err
	})
	return n, err
}

// Remove removes g once what runs in it has ended, with the cgroups left
// under it (a server's sandboxes', a runtime's containers'), deepest
// first.
func (g *AcctGroup) Remove() {
	var dirs []string
	err := filepath.WalkDir(g.dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return err
	})
	if err != nil {
		log.Printf("listing the cgroups under %s: %v", g.dir, err)
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Printf("removing cgroup %s: %v", d, err)
		}
	}
}
