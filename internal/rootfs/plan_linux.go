package rootfs

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/plan"
)

// planner writes a step's ops; each op's context starts with the step's
// name, as the error of the step did when it made its system calls
// itself, so either executor's failure reads as before.
type planner struct {
	p    *plan.Plan
	what string
	// etcFD holds the /etc template from openEtc to buildEtc; etcHeld
	// says the caller opened it and closes it, not the plan.
	etcFD   int
	etcHeld bool
	// freshProc, when set, is the sandbox's own procfs, already mounted
	// (Build applies each step before planning the next): the view reads
	// it where the /proc warden sees lacks a file (subset=pid).
	freshProc string
}

// apply is plan.Apply with the checks' failures worded as the steps
// that made the checks themselves worded them: the missing directory
// alone, the wrong node with its mode and device.
func apply(ops []plan.Op) error {
	for _, op := range ops {
		if err := plan.Apply([]plan.Op{op}); err != nil {
			return explain(op, err)
		}
	}
	return nil
}

// explain words err, the failure of op.
func explain(op plan.Op, err error) error {
	switch {
	case op.Code == plan.CheckDir:
		return errors.New(op.Context)
	case op.Code == plan.CheckChrdev && errors.Is(err, unix.ENODEV):
		var st unix.Stat_t
		if serr := unix.Stat(op.Strs[0], &st); serr != nil {
			return err
		}
		return fmt.Errorf("%s (mode %o, device %d:%d)", op.Context, st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev))
	}
	return err
}

// add appends an op whose error context is the step's name and ctx.
func (pl *planner) add(code plan.Code, ints []uint64, strs []string, ctx string) {
	c := pl.what
	switch {
	case c == "":
		c = ctx
	case ctx != "":
		c += ": " + ctx
	}
	pl.p.Add(plan.Op{Code: code, Ints: ints, Strs: strs, Context: c})
}

func (pl *planner) mount(src, dst, fstype string, flags uintptr, data string) {
	pl.mountOK(src, dst, fstype, flags, data, 0)
}

// mountOK is mount where the errno ok is no failure.
func (pl *planner) mountOK(src, dst, fstype string, flags uintptr, data string, ok unix.Errno) {
	pl.add(plan.Mount, []uint64{uint64(flags), uint64(ok)}, []string{src, dst, fstype, data}, fmt.Sprintf("mounting %q on %q", src, dst))
}

// restrict adds attributes (MOUNT_ATTR_*) to the mount at dst and, with
// recursive, to every mount below it, in one mount_setattr call. Adding a
// restriction is allowed even where the kernel locked a mount's flags when
// it crossed into this user namespace, which a remount would have to
// repeat; and a remount never reaches submounts.
func (pl *planner) restrict(dst string, attrs uint64, recursive bool) {
	pl.restrictOK(dst, attrs, recursive, 0)
}

func (pl *planner) restrictOK(dst string, attrs uint64, recursive bool, ok unix.Errno) {
	var flags uint64
	if recursive {
		flags = unix.AT_RECURSIVE
	}
	pl.add(plan.MountSetattr, []uint64{attrs, flags, uint64(ok)}, []string{dst}, fmt.Sprintf("restricting mount %q", dst))
}

// bindRO binds src at dst, read-only, nosuid and nodev; recursive binds
// the mounts below src too, and restricts every one of them.
func (pl *planner) bindRO(src, dst string, recursive bool) {
	flags := uintptr(unix.MS_BIND)
	if recursive {
		flags |= unix.MS_REC
	}
	pl.mount(src, dst, "", flags, "")
	pl.restrict(dst, readOnly, recursive)
}

func (pl *planner) mkdir(p string, mode uint32) { pl.mkdirOK(p, mode, 0) }

func (pl *planner) mkdirOK(p string, mode uint32, ok unix.Errno) {
	pl.add(plan.Mkdir, []uint64{uint64(mode), uint64(ok)}, []string{p}, "mkdir "+p)
}

func (pl *planner) chmod(p string, mode uint32) {
	pl.add(plan.Chmod, []uint64{uint64(mode)}, []string{p}, "chmod "+p)
}

func (pl *planner) symlink(target, link string) {
	pl.add(plan.Symlink, nil, []string{target, link}, "symlink "+target+" "+link)
}

// touch creates an empty file at p for a bind to cover.
func (pl *planner) touch(p string) { pl.add(plan.Touch, []uint64{0o644}, []string{p}, "open "+p) }

func (pl *planner) writeFile(p, content string, mode uint32) {
	pl.add(plan.WriteFile, []uint64{uint64(mode)}, []string{p, content}, "open "+p)
}
