package docker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spec"
)

// procBindable are the rootfs.ProcView files runc lets a container bind
// over (its checkProcMount allows the files LXCFS replaces and a few the
// view does not replace, such as slabinfo and net/dev, and refuses every
// other path in /proc): they are written for each box, the view's others
// are masked (maskedPaths), since the boxed init cannot mount its own.
var procBindable = []string{"cpuinfo", "diskstats", "meminfo", "stat", "swaps", "uptime", "loadavg"}

// viewDir holds a box's view files in its scratch tmpfs, beside the
// directories the box sees, so that its mountinfo names each bind by
// its path there (/view/meminfo), not by a host path.
const viewDir = "view"

// boxView is what a box is shown of its machine: the binds of its own
// /proc files and the cpuset that confines it to the CPUs they count.
type boxView struct {
	binds []string
	// cpuset is the container's CpusetCpus (boxCPUs), and cpus how many
	// CPUs it holds: the most the box's quota can use.
	cpuset string
	cpus   int
}

// makeView writes the box's view files (the same rootfs.ProcFile
// contents the native init writes) into scratch and picks its CPUs
// (boxCPUs: ceil(--cpus) of Warden's, all of them without a quota). The
// files belong to root, mode 0444 whatever the umask, and are bound
// read-only, so the box reads them and cannot change them.
func makeView(scratch string, l spec.Limits) (boxView, error) {
	cpus, err := boxCPUs(rootfs.ViewCPUs(l.CPUs))
	if err != nil {
		return boxView{}, fmt.Errorf("choosing the box's CPUs: %w", err)
	}
	v := agent.View(l)
	v.CPUs = len(cpus)
	src, err := rootfs.ReadViewSource("/proc", v)
	if err != nil {
		return boxView{}, fmt.Errorf("reading the host's /proc for the box's view: %w", err)
	}
	dir := filepath.Join(scratch, viewDir)
	if err := mkdirMode(dir, 0o755); err != nil {
		return boxView{}, err
	}
	bv := boxView{cpuset: cpuList(cpus), cpus: len(cpus)}
	for _, f := range bindableView() {
		if _, err := os.Stat(filepath.Join("/proc", f.Name)); errors.Is(err, os.ErrNotExist) {
			continue // a kernel without the entry shows nothing to hide
		}
		p := filepath.Join(dir, f.Name)
		if err := writeFileMode(p, []byte(f.Content(src)), 0o444); err != nil {
			return boxView{}, err
		}
		bv.binds = append(bv.binds, p+":/proc/"+f.Name+":ro")
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

// mkdirMode makes dir with exactly mode, which os.Mkdir leaves to the
// umask.
func mkdirMode(dir string, mode os.FileMode) error {
	if err := os.Mkdir(dir, mode); err != nil {
		return err
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("chmod %q: %w", dir, err)
	}
	return nil
}

// writeFileMode writes p with exactly mode, which os.WriteFile leaves to
// the umask.
func writeFileMode(p string, b []byte, mode os.FileMode) error {
	if err := os.WriteFile(p, b, mode); err != nil {
		return err
	}
	if err := os.Chmod(p, mode); err != nil {
		return fmt.Errorf("chmod %q: %w", p, err)
	}
	return nil
}
