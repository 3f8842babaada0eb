package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// v2Controllers are the controllers Warden enables for its cgroups on v2. CPU time needs
// none: every v2 cgroup has cpu.stat.
var v2Controllers = []string{ctlMemory, ctlPids, ctlCPU}

// leafDir is the child of a delegated cgroup that Warden moves itself into when that cgroup
// must give controllers to its children (the pattern systemd documents for Delegate=yes).
const leafDir = "supervisor"

// v2Layout is where Warden puts its cgroups in the unified hierarchy, computed once per
// process (see current), plus the once-per-process setup of that place.
//
// v2 lets a cgroup other than the root give controllers to its children only while it has no
// processes of its own. So Warden does not nest under its own cgroup, which has Warden in it:
//
//   - Where it may write the hierarchy's top (root on the host, or a container whose cgroup
//     namespace root was delegated to it), base is that top. The host's root cgroup is exempt
//     from the rule, so <top>/warden/<name> works wherever Warden itself runs; the price is
//     that sandboxes are not charged to the limits of the service Warden runs in.
//   - Otherwise (rootless, in a delegated subtree such as a systemd scope with
//     Delegate=yes) base is the own cgroup. If controllers must be enabled there and it has
//     processes, Warden moves itself into <own>/supervisor first; a later Warden started
//     from that leaf uses the same base.
//
// Either way a sandbox is <base>/warden/<name>.
type v2Layout struct {
	mount mount
	// own is the caller's cgroup directory as it was when the layout was made.
	own string
	// base is where warden/ goes; top tells whether it is the hierarchy's top.
	base string
	top  bool
	// err says why the unified hierarchy cannot be used at all.
	err error

	mu sync.Mutex
	// ready is set once setup succeeded; skipped then says which controllers cannot be had
	// and why (read-only from then on).
	ready   bool
	skipped map[string]*ControllerError
	// moved is the leaf cgroup Warden moved itself into, or "".
	moved string
	// noSwap is set once a write to memory.swap.max found no such file (swap not accounted).
	noSwap atomic.Bool
}

// newV2Layout finds the unified hierarchy and the base for Warden's cgroups. canWrite tells
// whether this process may create cgroups in a directory (writable, or a stand-in in tests).
func newV2Layout(h host, canWrite func(dir string) bool) *v2Layout {
	lay := &v2Layout{}
	if !h.self.HasV2 {
		lay.err = errors.New("/proc/self/cgroup has no cgroup v2 (0::) line")
		return lay
	}
	m, ok := findV2Mount(h.mounts, h.self.V2)
	if !ok {
		lay.err = errors.New("no cgroup2 file system is mounted")
		return lay
	}
	own, err := ownDir(m, h.self.V2)
	if err != nil {
		lay.err = err
		return lay
	}
	lay.mount, lay.own = m, own
	switch parent := filepath.Dir(own); {
	case canWrite(m.Point):
		lay.base, lay.top = m.Point, true
	case own != m.Point && filepath.Base(own) == leafDir && canWrite(parent):
		lay.base = parent
	default:
		lay.base = own
	}
	return lay
}

// prepare runs setup once per process (again only if it failed, or if warden/ vanished) and
// returns the controllers that cannot be had.
func (lay *v2Layout) prepare(again bool) (map[string]*ControllerError, error) {
	lay.mu.Lock()
	defer lay.mu.Unlock()
	if again {
		lay.ready = false
	}
	if !lay.ready {
		skipped, err := lay.setup()
		if err != nil {
			return skipped, err
		}
		lay.skipped, lay.ready = skipped, true
	}
	return lay.skipped, nil
}

// setup enables memory, pids and cpu (those the base has) in <base> and in <base>/warden,
// creating <base>/warden. A controller's files appear in a v2 cgroup only when its parent
// lists it in cgroup.subtree_control. Controllers that cannot be enabled are returned with
// the reason; the error is for a <base>/warden that cannot be created.
func (lay *v2Layout) setup() (map[string]*ControllerError, error) {
	skipped := make(map[string]*ControllerError)
	avail, err := readControllers(lay.base + "/cgroup.controllers")
	if err != nil {
		avail = map[string]bool{}
	}
	var want []string
	for _, ctl := range v2Controllers {
		switch {
		case avail[ctl]:
			want = append(want, ctl)
		case lay.base == lay.mount.Point:
			skipped[ctl] = &ControllerError{Controller: ctl, Problem: "is not in the cgroup v2 hierarchy at " + lay.base + " (bound to a v1 hierarchy, not delegated to this container, or not in this kernel)", Fix: fixMount}
		default:
			skipped[ctl] = &ControllerError{Controller: ctl, Problem: "is not delegated to " + lay.base + " (not in its cgroup.controllers)", Fix: fixScope}
		}
	}
	want = lay.enable(lay.base, want, skipped)
	wardenDir := lay.base + "/" + parentDir
	if err := mkdirCgroup(wardenDir); err != nil && !errors.Is(err, fs.ErrExist) {
		return skipped, err
	}
	lay.enable(wardenDir, want, skipped)
	return skipped, nil
}

// enable enables controllers for the children of dir: all in one write when they are not on
// yet, and one at a time only when that fails, so the error names its controller. When dir
// is the caller's own cgroup and the kernel answers EBUSY (dir has processes, Warden among
// them), Warden moves itself into <dir>/supervisor and tries again. It returns the
// controllers now enabled and records the others in skipped.
func (lay *v2Layout) enable(dir string, ctls []string, skipped map[string]*ControllerError) []string {
	file := dir + "/cgroup.subtree_control"
	on, err := readControllers(file)
	if err != nil {
		on = map[string]bool{}
	}
	var need []string
	for _, ctl := range ctls {
		if !on[ctl] {
			need = append(need, "+"+ctl)
		}
	}
	if len(need) == 0 {
		return ctls
	}
	err = writeFile(file, strings.Join(need, " "))
	if errors.Is(err, unix.EBUSY) && dir == lay.own && lay.moved == "" && lay.inOwn() {
		if merr := lay.moveToLeaf(); merr != nil {
			var ok []string
			for _, ctl := range ctls {
				if on[ctl] {
					ok = append(ok, ctl)
					continue
				}
				skipped[ctl] = &ControllerError{Controller: ctl,
					Problem: "cannot be enabled for the children of " + dir + ", which has processes, and warden could not move itself into " + dir + "/" + leafDir,
					Fix:     fixScope, Err: merr}
			}
			return ok
		}
		err = writeFile(file, strings.Join(need, " "))
	}
	if err == nil {
		return ctls
	}
	var ok []string
	for _, ctl := range ctls {
		if on[ctl] {
			ok = append(ok, ctl)
			continue
		}
		err := writeFile(file, "+"+ctl)
		switch {
		case err == nil:
			ok = append(ok, ctl)
		case errors.Is(err, unix.EBUSY):
			skipped[ctl] = &ControllerError{Controller: ctl, Problem: "cannot be enabled for the children of " + dir + ", which has processes" + othersIn(dir), Fix: fixScope, Err: unix.EBUSY}
		case isPermission(err):
			skipped[ctl] = &ControllerError{Controller: ctl, Problem: "is not writable at " + file, Fix: fixScope, Err: unwrapPath(err)}
		default:
			skipped[ctl] = &ControllerError{Controller: ctl, Problem: "cannot be enabled for the children of " + dir, Err: unwrapPath(err)}
		}
	}
	return ok
}

// inOwn tells whether the calling process is still in its own cgroup (as the layout found it)
// and so may be what keeps it from enabling controllers.
func (lay *v2Layout) inOwn() bool {
	pids, err := readPids(lay.own)
	return err == nil && slices.Contains(pids, os.Getpid())
}

// moveToLeaf moves the calling process, all its threads, into <own>/supervisor.
func (lay *v2Layout) moveToLeaf() error {
	leaf := lay.own + "/" + leafDir
	if err := mkdirCgroup(leaf); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := writeFile(leaf+"/cgroup.procs", strconv.Itoa(os.Getpid())); err != nil {
		return err
	}
	lay.moved = leaf
	return nil
}

// othersIn names a few processes in dir, for the EBUSY message: " (pids 12, 34)".
func othersIn(dir string) string {
	pids, err := readPids(dir)
	if err != nil || len(pids) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(" (pids ")
	for i, p := range pids {
		if i == 5 {
			b.WriteString(", ...")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(p))
	}
	b.WriteString(")")
	return b.String()
}

// v2Cgroup is a sandbox's cgroup on v2: one directory.
type v2Cgroup struct {
	dir string

	mu      sync.Mutex
	deleted bool
}

// createV2 makes <base>/warden/<name> and writes the limits: after the first call, that is
// one mkdir and one write per limit (two for memory). It returns, besides the cgroup, why each
// optional controller was skipped (for Probe; the map must not be modified).
func createV2(lay *v2Layout, name string, l Limits) (_ *v2Cgroup, skipped map[string]*ControllerError, err error) {
	req := required(l)
	firstRequired := func(skipped map[string]*ControllerError) *ControllerError {
		for _, ctl := range v2Controllers {
			if e := skipped[ctl]; e != nil && req[ctl] {
				return e
			}
		}
		return nil
	}
	// noDir turns a failure to create a directory into New's error: which limit cannot be
	// had, or that there is no cgroup at all.
	noDir := func(dir string, err error) error {
		if !isPermission(err) {
			return fmt.Errorf("creating cgroup %s: %w", dir, unwrapPath(err))
		}
		for _, ctl := range v2Controllers {
			if req[ctl] {
				return &ControllerError{Controller: ctl, Problem: "is not writable at " + dir, Fix: fixScope, Err: unwrapPath(err)}
			}
		}
		return fmt.Errorf("%w: creating %s: %w; %s", ErrNoCgroup, dir, unwrapPath(err), fixScope)
	}

	if lay.err != nil {
		skipped = make(map[string]*ControllerError)
		for _, ctl := range v2Controllers {
			skipped[ctl] = &ControllerError{Controller: ctl, Problem: "is unusable", Fix: fixMount, Err: lay.err}
		}
		if e := firstRequired(skipped); e != nil {
			return nil, skipped, e
		}
		return nil, skipped, fmt.Errorf("%w: %w", ErrNoCgroup, lay.err)
	}
	skipped, err = lay.prepare(false)
	if err != nil {
		return nil, skipped, noDir(lay.base+"/"+parentDir, err)
	}
	if e := firstRequired(skipped); e != nil {
		return nil, skipped, e
	}
	dir := lay.base + "/" + parentDir + "/" + name
	err = mkdirCgroup(dir)
	if errors.Is(err, fs.ErrNotExist) {
		// warden/ was removed since setup: make it again.
		if skipped, err = lay.prepare(true); err != nil {
			return nil, skipped, noDir(lay.base+"/"+parentDir, err)
		}
		if e := firstRequired(skipped); e != nil {
			return nil, skipped, e
		}
		err = mkdirCgroup(dir)
	}
	if err != nil {
		return nil, skipped, noDir(dir, err)
	}
	c := &v2Cgroup{dir: dir}
	if err := lay.setLimits(dir, l); err != nil {
		return nil, skipped, errors.Join(err, rmdirRetry(dir))
	}
	return c, skipped, nil
}

// setLimits writes memory.max with memory.swap.max 0 (where the kernel accounts swap, which is
// when the cgroup has that file), pids.max, cpu.max as "quota period" and cpu.weight in
// proportion to it (cpuWeight).
func (lay *v2Layout) setLimits(dir string, l Limits) error {
	if l.MemoryBytes > 0 {
		if err := writeControl(ctlMemory, dir, "memory.max", itoa(l.MemoryBytes)); err != nil {
			return err
		}
		if !lay.noSwap.Load() {
			err := writeControl(ctlMemory, dir, "memory.swap.max", "0")
			if errors.Is(err, fs.ErrNotExist) {
				lay.noSwap.Store(true)
			} else if err != nil {
				return err
			}
		}
	}
	if l.Pids > 0 {
		if err := writeControl(ctlPids, dir, "pids.max", itoa(l.Pids)); err != nil {
			return err
		}
	}
	if q, _ := cfsQuota(l.CPUs); q > 0 {
		if err := writeControl(ctlCPU, dir, "cpu.max", itoa(q)+" "+itoa(cfsPeriodUS)); err != nil {
			return err
		}
	}
	if w := cpuWeight(l.CPUs, 100, 1); w > 0 {
		if err := writeControl(ctlCPU, dir, "cpu.weight", itoa(w)); err != nil {
			return err
		}
	}
	return nil
}

// AddProc writes the pid to cgroup.procs, which moves all of the process's threads.
func (c *v2Cgroup) AddProc(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("adding process %d to cgroup %s: invalid pid", pid, c.dir)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted {
		return fmt.Errorf("adding process %d to cgroup %s: cgroup was deleted", pid, c.dir)
	}
	if err := writeFile(c.dir+"/cgroup.procs", strconv.Itoa(pid)); err != nil {
		return fmt.Errorf("adding process %d to cgroup: %w", pid, err)
	}
	return nil
}

// Stats reads cpu.stat, memory.peak and memory.events.
func (c *v2Cgroup) Stats() (Stats, error) {
	var s Stats
	b, err := readSmall(c.dir + "/cpu.stat")
	if err != nil {
		return Stats{}, fmt.Errorf("reading CPU time: %w", err)
	}
	s.CPUTime, err = parseCPUStat(strings.NewReader(string(b)))
	if err != nil {
		return Stats{}, fmt.Errorf("reading CPU time in %s: %w", c.dir, err)
	}
	peak, err := readUint(c.dir + "/memory.peak")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Stats{}, fmt.Errorf("reading peak memory: %w", err)
	}
	s.PeakMemoryBytes = int64(min(peak, 1<<63-1))
	b, err = readSmall(c.dir + "/memory.events")
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Stats{}, fmt.Errorf("reading OOM kills: %w", err)
	default:
		s.OOMKills, err = parseMemoryEvents(strings.NewReader(string(b)))
		if err != nil {
			return Stats{}, fmt.Errorf("reading OOM kills in %s: %w", c.dir, err)
		}
	}
	return s, nil
}

// Kill writes cgroup.kill (Linux 5.14+), which kills the whole subtree at once. Before that it
// freezes (bounded), kills each process and thaws. A cgroup removed under it (its processes
// ended) has nothing left to kill. It never waits for the processes, so it
// cannot reap the caller's own child and steal its exit status from exec.Cmd.Wait.
func (c *v2Cgroup) Kill() error {
	err := goneAsNotExist(writeFile(c.dir+"/cgroup.kill", "1"))
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("killing processes in cgroup %s: %w", c.dir, err)
	}
	freeze := c.dir + "/cgroup.freeze"
	if writeFile(freeze, "1") == nil {
		waitFor(100*time.Millisecond, func() bool {
			kv, err := readKeyed(c.dir + "/cgroup.events")
			return err != nil || kv["frozen"] == 1
		})
		defer writeFile(freeze, "0") //nolint:errcheck // best effort: the processes are dying
	}
	if err := killAll(func() ([]int, error) { return treePids(c.dir) }); err != nil {
		return fmt.Errorf("killing processes in cgroup %s: %w", c.dir, err)
	}
	return nil
}

// Delete removes the directory, retrying briefly while exiting tasks are still listed.
func (c *v2Cgroup) Delete() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := rmdirRetry(c.dir); err != nil {
		return err
	}
	c.deleted = true
	return nil
}

// Path is the cgroup's directory.
func (c *v2Cgroup) Path() string { return c.dir }

// Placement names the directory for CLONE_INTO_CGROUP.
func (c *v2Cgroup) Placement() Placement { return Placement{CloneInto: c.dir} }

// Child is not offered on v2 (see Cgroup.Child).
func (c *v2Cgroup) Child(string) (Cgroup, error) { return nil, errors.ErrUnsupported }
