package microvm

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/warden-sandbox/warden/internal/vmguest"
)

// bind is one host file or directory QEMU's own root holds, at Dst, read-only
// unless Writable, and without exec, device nodes or set-id bits unless it
// needs them.
type bind struct {
	// Src is the host path, or "" for a file the launcher holds open
	// (the QEMU binary, the guest kernel, an initrd on disk).
	Src string
	Dst string
	// File binds a file (its mount point is an empty file), not a directory.
	File bool
	// Exec allows executing and mapping code from it (the binary, its libraries).
	Exec bool
	// Dev allows the device node it is.
	Dev bool
	// Writable is a share the guest may write.
	Writable bool
	// Tree is a share: its copy keeps the mounts the caller put inside it
	// (a template root with the host's /usr bound in), each restricted as
	// the share is.
	Tree bool
}

// qemuBinary is where QEMU's root holds the binary it runs as.
const qemuBinary = "/usr/bin/qemu-system-x86_64"

// hostLibDirs are the directories QEMU 7.2's libraries, its dynamic loader
// and its accelerator modules (qemu/accel-tcg-x86_64.so) load from on a
// Debian amd64 host (ldd qemu-system-x86_64); those that are symlinks on the
// host (merged /usr) are symlinks in QEMU's root too (rootLinks).
var hostLibDirs = []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/lib/x86_64-linux-gnu", "/lib64"}

// rootLinks are the top-level names a merged-/usr host makes symlinks,
// which QEMU's root mirrors so the loader's paths (/lib64/ld-linux-x86-64.so.2)
// resolve.
var rootLinks = []string{"/bin", "/lib", "/lib64"}

// firmware is the only file of /usr/share/qemu that QEMU 7.2's microvm
// machine loads: qboot, its minimal BIOS (strace of a boot).
const firmware = "/usr/share/qemu/qboot.rom"

// rootBinds lists what QEMU's root holds under accel: the binary, the
// library directories libDirs (the host's real ones), the firmware,
// /dev/null, /dev/kvm under KVM only, the guest kernel, the initrd when it
// is a file, and each share at its host path. Nothing else of the host:
// no /sys, /etc or /tmp (QEMU 7.2 probes them and runs without); its
// /proc is its own (qemuProc).
func rootBinds(accel Accel, libDirs []string, initrdFile bool, shares []Share) []bind {
	bs := []bind{{Dst: qemuBinary, File: true, Exec: true}}
	for _, d := range libDirs {
		bs = append(bs, bind{Src: d, Dst: d, Exec: true})
	}
	bs = append(bs, bind{Src: firmware, Dst: firmware, File: true}, bind{Src: "/dev/null", Dst: "/dev/null", File: true, Dev: true})
	if accel == KVM {
		bs = append(bs, bind{Src: "/dev/kvm", Dst: "/dev/kvm", File: true, Dev: true})
	}
	bs = append(bs, bind{Dst: guestKernel, File: true})
	if initrdFile {
		bs = append(bs, bind{Dst: guestInitrd, File: true})
	}
	for _, s := range shares {
		bs = append(bs, bind{Dst: s.Dir, Writable: !s.ReadOnly, Tree: true})
	}
	return bs
}

// reservedDirs are the paths of QEMU's root that a share may neither be,
// nor lie under, nor contain: it would hide QEMU's own files (/proc is
// QEMU's own procfs), or share the host kernel's (/sys).
var reservedDirs = []string{"/usr", "/dev", "/vm", "/bin", "/lib", "/lib64", "/proc", "/sys"}

// checkShares says in one line what is wrong with the shares: more than
// the machine has transports for; a tag the guest would refuse or one used
// twice; a directory that is not absolute and clean, holds a comma (QEMU's
// option parser would read the rest as options), is "/", is one QEMU's
// root needs for itself, is shared twice, or lies inside another share.
// Nesting is refused so that QEMU's root never makes a mount point through
// a bind (which would reach the host's directory as root); whether a share
// exists, is a directory reached without a symlink and is on an ordinary
// filesystem is checked when it is opened (openShare).
func checkShares(shares []Share) error {
	if len(shares) > maxShares {
		return fmt.Errorf("microvm: %d shares, more than the %d the microvm machine has room for", len(shares), maxShares)
	}
	tags, dirs := map[string]bool{}, map[string]bool{}
	for _, s := range shares {
		if err := vmguest.CheckTag(s.Tag); err != nil {
			return fmt.Errorf("microvm: share %q: %w", s.Dir, err)
		}
		if tags[s.Tag] {
			return fmt.Errorf("microvm: share tag %q is used twice; give each share its own", s.Tag)
		}
		tags[s.Tag] = true
		if err := checkShareDir(s, shares, dirs); err != nil {
			return err
		}
		dirs[s.Dir] = true
	}
	return nil
}

// checkShareDir is checkShares' verdict on one share's directory; seen
// holds the directories of the shares before it.
func checkShareDir(s Share, shares []Share, seen map[string]bool) error {
	d := s.Dir
	switch {
	case d == "" || !filepath.IsAbs(d):
		return fmt.Errorf("microvm: share %q: directory %q is not an absolute path; give the host directory's full path", s.Tag, d)
	case filepath.Clean(d) != d:
		return fmt.Errorf("microvm: share %q: directory %q is not clean; give it as %q", s.Tag, d, filepath.Clean(d))
	case strings.ContainsAny(d, ",\x00"):
		return fmt.Errorf("microvm: share %q: directory %q holds a comma or NUL, which QEMU's options cannot carry; share a directory without one", s.Tag, d)
	case d == "/":
		return fmt.Errorf("microvm: share %q: the host's root cannot be shared; share a directory under it", s.Tag)
	case seen[d]:
		return fmt.Errorf("microvm: share %q: directory %q is shared twice; share it once", s.Tag, d)
	}
	if r := reservedOverlap(d); r != "" {
		return fmt.Errorf("microvm: share %q: directory %q overlaps %s, which QEMU's own root holds; share another directory", s.Tag, d, r)
	}
	if o := nestedShare(d, shares); o != "" {
		return fmt.Errorf("microvm: share %q: directory %q is inside or holds the share %s; share directories apart", s.Tag, d, o)
	}
	return nil
}

// nestedShare is a share's directory that d lies under or holds, or "".
func nestedShare(d string, shares []Share) string {
	for _, s := range shares {
		if strings.HasPrefix(d, s.Dir+"/") || strings.HasPrefix(s.Dir, d+"/") {
			return s.Dir
		}
	}
	return ""
}

// reservedOverlap is the reserved directory d is, lies under or holds, or "".
func reservedOverlap(d string) string {
	for _, r := range reservedDirs {
		if d == r || strings.HasPrefix(d, r+"/") || strings.HasPrefix(r, d+"/") {
			return r
		}
	}
	return ""
}
