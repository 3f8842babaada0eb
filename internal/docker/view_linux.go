package docker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spec"
)

// procBindable are the /proc files runc lets a container bind over (its
// checkProcMount allows the files LXCFS replaces, and refuses every other
// path in /proc): the rootfs.ProcView files among them are written for
// each box, the others are masked (maskedPaths), since the boxed init
// cannot mount its own.
var procBindable = []string{"cpuinfo", "diskstats", "meminfo", "stat", "swaps", "uptime", "loadavg"}

// viewDir holds a box's view files in its scratch tmpfs, beside the
// directories the box sees, so that its mountinfo names each bind by
// its path there (/view/meminfo), not by a host path.
const viewDir = "view"

// boxView is what a box is shown of its machine: the binds of its own
// /proc files and the cpuset that confines it to the CPUs they count.
type boxView struct {
	binds []string
	// cpuset is the container's CpusetCpus, empty for every CPU.
	cpuset string
}

// makeView writes the box's view files (the same rootfs.ProcFile
// contents the native init writes) into scratch and picks its CPUs as
// the native init narrows its affinity: ceil(--cpus) of Warden's, from
// the one this thread runs on. The files belong to root, mode 0444, and
// are bound read-only, so the box reads them and cannot change them.
func makeView(scratch string, l spec.Limits) (boxView, error) {
	cpus, narrowed, err := nsinit.SandboxCPUs(rootfs.ViewCPUs(l.CPUs))
	if err != nil {
		return boxView{}, err
	}
	v := agent.View(l)
	v.CPUs = len(cpus)
	src, err := rootfs.ReadViewSource("/proc", v)
	if err != nil {
		return boxView{}, fmt.Errorf("reading the host's /proc for the box's view: %w", err)
	}
	dir := filepath.Join(scratch, viewDir)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return boxView{}, err
	}
	var bv boxView
	for _, f := range bindableView() {
		if _, err := os.Stat(filepath.Join("/proc", f.Name)); errors.Is(err, os.ErrNotExist) {
			continue // a kernel without the entry shows nothing to hide
		}
		p := filepath.Join(dir, f.Name)
		if err := os.WriteFile(p, []byte(f.Content(src)), 0o444); err != nil {
			return boxView{}, err
		}
		bv.binds = append(bv.binds, p+":/proc/"+f.Name+":ro")
	}
	if narrowed {
		bv.cpuset = cpuList(cpus)
	}
	return bv, nil
}

// bindableView are the rootfs.ProcView files a container may have bound.
func bindableView() []rootfs.ProcFile {
	var fs []rootfs.ProcFile
	for _, f := range rootfs.ProcView {
		if slices.Contains(procBindable, f.Name) {
			fs = append(fs, f)
		}
	}
	return fs
}

// unbindableView are the /proc paths of the rootfs.ProcView files runc
// refuses to bind: each shows the host's figure or id, so it is masked.
func unbindableView() []string {
	var ps []string
	for _, f := range rootfs.ProcView {
		if !slices.Contains(procBindable, f.Name) {
			ps = append(ps, "/proc/"+f.Name)
		}
	}
	return ps
}

// cpuList is cpus as a cpuset list ("0,3").
func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}
