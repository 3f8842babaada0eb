package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ctlCPUAcct is the v1 controller that counts CPU time (v2 counts it in every cgroup).
const ctlCPUAcct = "cpuacct"

// ctlFreezer is the v1 controller that stops and resumes a cgroup's tasks (Freeze, Thaw); v2
// has cgroup.freeze in every cgroup instead.
const ctlFreezer = "freezer"

// v1Controllers are the v1 controllers Warden makes a directory for: the three it limits,
// cpuacct for CPU time and freezer for pausing a session (never required: without it Freeze
// says so). Kill does not use the freezer: every sandbox has a PID namespace of its own, so its
// processes die with its init, and Kill is only a backstop. No others (blkio, cpuset, devices,
// ...): each hierarchy costs a mkdir, a cgroup.procs migration and an rmdir per sandbox, and
// cpuset would even need cpus and mems copied in first.
var v1Controllers = []string{ctlMemory, ctlPids, ctlCPU, ctlCPUAcct, ctlFreezer}

// v1Hier is one v1 hierarchy Warden uses, as found once per process.
type v1Hier struct {
	// ctls are Warden's controllers in it, comma-joined: "memory", or "cpu,cpuacct" where
	// those are co-mounted (one directory serves both).
	ctls string
	// base is <own>/warden, where <own> is the caller's cgroup in the hierarchy.
	base string
}

// v1Layout is what New needs to know about the v1 hierarchies. It is computed once per
// process (see current) and holds the few facts learnt on the way.
type v1Layout struct {
	hiers []v1Hier
	// missing are the controllers that cannot be used at all, and why.
	missing map[string]*ControllerError

	// noMemsw is set once a write to memory.memsw.limit_in_bytes found no such file: the
	// kernel does not account swap per cgroup (swapaccount=0), and swappiness is used instead.
	noMemsw atomic.Bool
	// oomReset tells whether new memory cgroups inherit a disabled OOM killer from
	// <own>/warden, and must have it enabled again; read once, on the first memory limit.
	oomOnce  sync.Once
	oomReset bool
}

// newV1Layout finds, for each controller, the hierarchy it is mounted in and the caller's cgroup
// there. It makes no syscalls.
func newV1Layout(h host) *v1Layout {
	lay := &v1Layout{missing: make(map[string]*ControllerError)}
	own := make(map[string]int) // own directory -> index in hiers
	for _, ctl := range v1Controllers {
		procPath, ok := h.self.V1[ctl]
		if !ok {
			lay.missing[ctl] = &ControllerError{Controller: ctl, Problem: "is not mounted on this host", Fix: fixMount}
			continue
		}
		m, ok := findV1Mount(h.mounts, ctl, procPath)
		if !ok {
			lay.missing[ctl] = &ControllerError{Controller: ctl, Problem: "is not mounted on this host", Fix: fixMount}
			continue
		}
		dir, err := ownDir(m, procPath)
		if err != nil {
			lay.missing[ctl] = &ControllerError{Controller: ctl, Problem: "is not reachable: " + err.Error(), Fix: fixMount}
			continue
		}
		if i, ok := own[dir]; ok {
			lay.hiers[i].ctls += "," + ctl
			continue
		}
		own[dir] = len(lay.hiers)
		lay.hiers = append(lay.hiers, v1Hier{ctls: ctl, base: filepath.Join(dir, parentDir)})
	}
	return lay
}

// memBase is the memory hierarchy's warden/ directory, or "".
func (lay *v1Layout) memBase() string {
	for _, hr := range lay.hiers {
		if hasCtl(hr.ctls, ctlMemory) {
			return hr.base
		}
	}
	return ""
}

// hasCtl tells whether a comma-joined controller list has ctl.
func hasCtl(ctls, ctl string) bool {
	for c := range strings.SplitSeq(ctls, ",") {
		if c == ctl {
			return true
		}
	}
	return false
}

// v1Dir is one directory of a sandbox's v1 cgroup.
type v1Dir struct {
	path string
	ctls string // as in v1Hier
	// own is the caller's cgroup in the hierarchy when New made the sandbox's (<own>), which
	// a thread that joined returns to (Placement.ReturnFiles).
	own string
}

// v1Cgroup is a sandbox's cgroup on v1: a directory in each hierarchy.
type v1Cgroup struct {
	name string
	// dirs are the directories, one per hierarchy, memory first.
	dirs []v1Dir
	// memory and cpuacct are the directories Stats reads, freezer the one Freeze writes, or "".
	memory, cpuacct, freezer string
	// byCtl maps each controller to its directory, for the tests.
	byCtl map[string]string

	mu      sync.Mutex
	deleted bool
}

// createV1 makes <own>/warden/<name> in each v1 hierarchy and writes the limits. It returns,
// besides the cgroup, why each optional controller was skipped (for Probe). On failure it
// removes what it made.
//
// Per sandbox that is one mkdir per hierarchy and one write per limit (three for memory: limit, swap, socket buffers); the
// CFS period is not written, since a new cpu cgroup always starts with the kernel's default
// of 100ms (it is not inherited), which is the cfsPeriodUS the quota is computed for.
func createV1(lay *v1Layout, name string, l Limits) (_ *v1Cgroup, skipped map[string]*ControllerError, err error) {
	req := required(l)
	for _, ctl := range v1Controllers {
		if e := lay.missing[ctl]; e != nil && req[ctl] {
			return nil, nil, e
		}
	}
	skipped = maps.Clone(lay.missing)
	c := &v1Cgroup{name: name, dirs: make([]v1Dir, 0, len(lay.hiers)), byCtl: make(map[string]string, len(v1Controllers))}
	defer func() {
		if err != nil {
			for i := len(c.dirs) - 1; i >= 0; i-- {
				err = errors.Join(err, rmdirRetry(c.dirs[i].path))
			}
		}
	}()
	for _, hr := range lay.hiers {
		dir := hr.base + "/" + name
		err := mkdirSandbox(dir)
		var problem, fix string
		switch {
		case err == nil:
			c.dirs = append(c.dirs, v1Dir{path: dir, ctls: hr.ctls, own: filepath.Dir(hr.base)})
			for ctl := range strings.SplitSeq(hr.ctls, ",") {
				c.byCtl[ctl] = dir
			}
			continue
		case errors.Is(err, fs.ErrExist):
			return nil, nil, fmt.Errorf("creating cgroup %s: %w", dir, unwrapPath(err))
		case isPermission(err):
			problem, fix = "is not writable at "+dir, fixDelegate
		default:
			problem = "cannot be used at " + dir
		}
		for ctl := range strings.SplitSeq(hr.ctls, ",") {
			e := &ControllerError{Controller: ctl, Problem: problem, Fix: fix, Err: unwrapPath(err)}
			if req[ctl] {
				return nil, nil, e
			}
			skipped[ctl] = e
		}
	}
	if len(c.dirs) == 0 {
		return nil, skipped, noCgroupError(skipped)
	}
	c.memory, c.cpuacct, c.freezer = c.byCtl[ctlMemory], c.byCtl[ctlCPUAcct], c.byCtl[ctlFreezer]
	if err := lay.setLimits(c, l); err != nil {
		return nil, nil, err
	}
	return c, skipped, nil
}

// setLimits writes the limits into a new v1 cgroup. Swap is capped at the memory limit
// (memsw counts memory plus swap) where the kernel accounts swap, and switched off through
// swappiness where it does not.
func (lay *v1Layout) setLimits(c *v1Cgroup, l Limits) error {
	if l.MemoryBytes > 0 {
		dir, v := c.memory, itoa(l.MemoryBytes)
		if err := writeControl(ctlMemory, dir, "memory.limit_in_bytes", v); err != nil {
			return err
		}
		if !lay.noMemsw.Load() {
			err := writeControl(ctlMemory, dir, "memory.memsw.limit_in_bytes", v)
			if errors.Is(err, fs.ErrNotExist) {
				lay.noMemsw.Store(true)
			} else if err != nil {
				return err
			}
		}
		if lay.noMemsw.Load() {
			if err := writeControl(ctlMemory, dir, "memory.swappiness", "0"); err != nil {
				return err
			}
		}
		// v1 does not charge socket buffers to the memory limit unless told to: without
		// this, a sandbox could queue gigabytes in loopback TCP connections (and push the
		// whole host into TCP memory pressure) while its own usage read a few MiB.
		if err := writeControl(ctlMemory, dir, "memory.kmem.tcp.limit_in_bytes", v); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		// A v1 memory cgroup inherits a disabled OOM killer from its parent, and would then
		// hang at its limit instead of killing. Whether warden/ has it disabled is read once.
		lay.oomOnce.Do(func() {
			oc, err := readOOMControl(filepath.Dir(dir))
			lay.oomReset = err == nil && oc.KillDisable
		})
		if lay.oomReset {
			if err := writeControl(ctlMemory, dir, "memory.oom_control", "0"); err != nil {
				return err
			}
		}
	}
	if l.Pids > 0 {
		if err := writeControl(ctlPids, c.byCtl[ctlPids], "pids.max", itoa(l.Pids)); err != nil {
			return err
		}
	}
	if q, _ := cfsQuota(l.CPUs); q > 0 {
		if err := writeControl(ctlCPU, c.byCtl[ctlCPU], "cpu.cfs_quota_us", itoa(q)); err != nil {
			return err
		}
	}
	if w := cpuWeight(l.CPUs, 1024, 2); w > 0 {
		if err := writeControl(ctlCPU, c.byCtl[ctlCPU], "cpu.shares", itoa(w)); err != nil {
			return err
		}
	}
	return nil
}

// noCgroupError says why no hierarchy could be used, by the first controller's reason (they
// are usually all the same), wrapping the cause but not ErrControllerUnavailable: no limit
// was asked for.
func noCgroupError(skipped map[string]*ControllerError) error {
	for _, n := range v1Controllers {
		if e := skipped[n]; e != nil {
			if e.Err != nil {
				return fmt.Errorf("%w: the %s hierarchy %s: %w", ErrNoCgroup, n, e.Problem, e.Err)
			}
			return fmt.Errorf("%w: the %s hierarchy %s", ErrNoCgroup, n, e.Problem)
		}
	}
	return fmt.Errorf("%w: no v1 hierarchy Warden uses is mounted", ErrNoCgroup)
}

// AddProc writes the pid to cgroup.procs in every hierarchy, which moves all of the process's
// threads. Each write is a migration, which is why Warden uses as few hierarchies as it can.
func (c *v1Cgroup) AddProc(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("adding process %d to cgroup %s: invalid pid", pid, c.Path())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted {
		return fmt.Errorf("adding process %d to cgroup %s: cgroup was deleted", pid, c.Path())
	}
	p := strconv.Itoa(pid)
	for _, d := range c.dirs {
		if err := writeFile(d.path+"/cgroup.procs", p); err != nil {
			return fmt.Errorf("adding process %d to the %s cgroup: %w", pid, d.ctls, err)
		}
	}
	return nil
}

// Stats reads cpuacct.usage, memory.max_usage_in_bytes and the oom_kill count in
// memory.oom_control.
func (c *v1Cgroup) Stats() (Stats, error) {
	var s Stats
	if c.cpuacct != "" {
		ns, err := readUint(c.cpuacct + "/cpuacct.usage")
		if err != nil {
			return Stats{}, fmt.Errorf("reading CPU time: %w", err)
		}
		s.CPUTime = time.Duration(min(ns, 1<<63-1))
	}
	if c.memory != "" {
		peak, err := readUint(c.memory + "/memory.max_usage_in_bytes")
		if err != nil {
			return Stats{}, fmt.Errorf("reading peak memory: %w", err)
		}
		s.PeakMemoryBytes = int64(min(peak, 1<<63-1))
		oc, err := readOOMControl(c.memory)
		if err != nil {
			return Stats{}, fmt.Errorf("reading OOM kills: %w", err)
		}
		s.OOMKills = oc.Kills
	}
	return s, nil
}

// Kill sends SIGKILL to each process in the cgroup and its child cgroups (a session's execs,
// see Child), listing them again until no new process shows up (bounded; see killAll), as v2's
// cgroup.kill does. There is no freezer to stop a fork loop first: the sandbox's PID
// namespace already ends every process when its init dies, so this is only a backstop. But
// it is the kill that ends a paused session (kill, then thaw): a process of a frozen child
// it missed would run again at the thaw.
func (c *v1Cgroup) Kill() error {
	if err := killAll(c.procs); err != nil {
		return fmt.Errorf("killing processes in cgroup %s: %w", c.Path(), err)
	}
	return nil
}

// procs lists the processes in any of the cgroup's hierarchies and their child cgroups (the
// hierarchies should agree, unless an AddProc failed half-way).
func (c *v1Cgroup) procs() ([]int, error) {
	var all []int
	for _, d := range c.dirs {
		pids, err := treePids(d.path)
		if err != nil {
			return nil, err
		}
		all = append(all, pids...)
	}
	return all, nil
}

// Delete removes the directory in each hierarchy, retrying briefly while exiting tasks are
// still listed.
func (c *v1Cgroup) Delete() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, d := range c.dirs {
		if err := rmdirRetry(d.path); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		c.deleted = true
	}
	return errors.Join(errs...)
}

// Path is the memory hierarchy's directory, or the first one there is.
// Placement lists the tasks file of each hierarchy directory, and of the caller's cgroup there.
func (c *v1Cgroup) Placement() Placement {
	p := Placement{ThreadFiles: make([]string, len(c.dirs)), ReturnFiles: make([]string, len(c.dirs))}
	for i, d := range c.dirs {
		p.ThreadFiles[i] = filepath.Join(d.path, "tasks")
		p.ReturnFiles[i] = filepath.Join(d.own, "tasks")
	}
	return p
}

func (c *v1Cgroup) Path() string {
	if c.memory != "" {
		return c.memory
	}
	if len(c.dirs) > 0 {
		return c.dirs[0].path
	}
	return c.name
}

// readOOMControl reads memory.oom_control of the v1 memory cgroup at dir.
func readOOMControl(dir string) (oomControl, error) {
	b, err := readSmall(dir + "/memory.oom_control")
	if err != nil {
		return oomControl{}, err
	}
	oc, err := parseOOMControl(strings.NewReader(string(b)))
	if err != nil {
		return oomControl{}, fmt.Errorf("parsing %s/memory.oom_control: %w", dir, err)
	}
	return oc, nil
}

// Child makes <dir>/<name> in each of c's hierarchies.
func (c *v1Cgroup) Child(name string) (Cgroup, error) {
	if !validChildName(name) {
		return nil, fmt.Errorf("invalid child cgroup name %q: use letters, digits and dashes", name)
	}
	child := &v1Cgroup{name: name, dirs: make([]v1Dir, 0, len(c.dirs)), byCtl: make(map[string]string, len(c.byCtl))}
	for _, d := range c.dirs {
		dir := d.path + "/" + name
		if err := mkdirCgroup(dir); err != nil {
			return nil, errors.Join(fmt.Errorf("creating cgroup %s: %w", dir, unwrapPath(err)), child.Delete())
		}
		child.dirs = append(child.dirs, v1Dir{path: dir, ctls: d.ctls, own: d.own})
		for ctl := range strings.SplitSeq(d.ctls, ",") {
			child.byCtl[ctl] = dir
		}
	}
	child.memory, child.cpuacct, child.freezer = child.byCtl[ctlMemory], child.byCtl[ctlCPUAcct], child.byCtl[ctlFreezer]
	return child, nil
}
