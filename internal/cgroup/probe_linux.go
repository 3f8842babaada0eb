package cgroup

import (
	"os"

	"github.com/warden-sandbox/warden/internal/boxname"
)

// Probe finds out what this host and user can do, by doing it: it creates a cgroup where New
// would, notes which controllers it got and why not the others, and removes it again. That is
// the only reliable test; permissions, delegation and v2's no-internal-processes rule all show
// up only when tried. On v2 that includes the once-per-process setup New would do, so a
// rootless Probe may move its process into <own>/supervisor, as New would.
func Probe() Report {
	r := Report{Mode: "none"}
	s := current()
	if s.err != nil {
		r.Reason = s.err.Error()
		return probeFill(r, nil)
	}
	r.Mode = s.h.mode
	r.Version = s.h.version
	var (
		skipped map[string]*ControllerError
		err     error
		cg      Cgroup
		caveats = make(map[string]string)
	)
	switch s.h.version {
	case versionV1:
		var c *v1Cgroup
		c, skipped, err = createV1(s.v1, boxname.New(), Limits{})
		if base := s.v1.memBase(); base != "" {
			r.Where = base
			if !exists(base + "/memory.memsw.limit_in_bytes") {
				caveats[ctlMemory] = "swap is not accounted (no memory.memsw.* files), so a sandbox may swap beyond its memory limit; boot with swapaccount=1"
			}
		}
		if skipped[ctlCPUAcct] != nil {
			caveats[ctlCPU] = "no cpuacct hierarchy: CPU time comes from rusage"
		}
		if e := skipped[ctlFreezer]; e != nil {
			r.NoFreeze = "the freezer " + e.reason()
		}
		if c != nil {
			cg = c
		}
	case versionV2:
		var c *v2Cgroup
		c, skipped, err = createV2(s.v2, boxname.New(), Limits{})
		if s.v2.err == nil {
			r.Where = s.v2.base + "/" + parentDir
		}
		if c != nil {
			cg = c
			if exists(c.dir+"/memory.max") && !exists(c.dir+"/memory.swap.max") {
				caveats[ctlMemory] = "swap is not accounted (no memory.swap.max), so a sandbox may swap beyond its memory limit"
			}
			if !exists(c.dir + "/cgroup.freeze") {
				r.NoFreeze = "this kernel has no cgroup.freeze (Linux 5.2 added it)"
			}
		}
	default:
		r.Reason = "no cgroup hierarchy is mounted"
		return probeFill(r, nil)
	}
	if err != nil {
		r.Reason = err.Error()
		return probeFill(r, skipped)
	}
	r.CanCreate = true
	if derr := cg.Delete(); derr != nil {
		r.Reason = "created a test cgroup but could not remove it: " + derr.Error()
	}
	r = probeFill(r, skipped)
	for i, c := range r.Controllers {
		if c.Available && caveats[c.Name] != "" {
			r.Controllers[i].Reason = caveats[c.Name]
		}
	}
	return r
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// probeFill adds the three controllers' lines: available when a cgroup was created and the
// controller was not skipped.
func probeFill(r Report, skipped map[string]*ControllerError) Report {
	if !r.CanCreate && r.NoFreeze == "" {
		r.NoFreeze = "no cgroup can be created: " + r.Reason
	}
	for _, ctl := range []string{ctlMemory, ctlPids, ctlCPU} {
		c := ControllerReport{Name: ctl, Available: r.CanCreate}
		if e := skipped[ctl]; e != nil {
			c.Available = false
			c.Reason = e.reason()
		} else if !r.CanCreate {
			c.Reason = "no cgroup could be created: " + r.Reason
		}
		r.Controllers = append(r.Controllers, c)
	}
	return r
}

// Parents lists the directories under which New creates cgroups for this process: one per v1
// hierarchy Warden uses, or the one on v2. A sandbox's cgroup is <dir>/<boxname.New()>, so this
// is where leak checks look for cgroups a crashed warden left behind.
func Parents() []string {
	s := current()
	switch {
	case s.err != nil:
		return nil
	case s.v1 != nil:
		dirs := make([]string, len(s.v1.hiers))
		for i, hr := range s.v1.hiers {
			dirs[i] = hr.base
		}
		return dirs
	case s.v2 != nil && s.v2.err == nil:
		return []string{s.v2.base + "/" + parentDir}
	}
	return nil
}
