// Package rootfs decides what a sandbox sees of the file system and builds it.
//
// The layout is data (which host paths are bound read-only, which /etc files
// are safe to show, which /proc paths are masked) so it can be reviewed and
// tested without privileges; the _linux.go files turn it into mounts inside
// the sandbox's own mount namespace and pivot_root into it.
package rootfs

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// UsrMergeLinks are the top-level directories that a usr-merged system makes
// symlinks into /usr. Each is recreated as the host has it: a symlink when
// the host has one, a read-only bind when the host has a real directory.
var UsrMergeLinks = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// EtcAllowlist names the host /etc entries an ordinary program needs: the
// dynamic loader's cache, TLS roots, name-service and locale data, and the
// config of interpreters shipped by the distribution. Anything else, and
// above all shadow, ssh keys, TLS private keys (ssl/private), machine-id and
// credentials, stays out. An entry may name a path below /etc.
var EtcAllowlist = []string{
	"alternatives", "debian_version", "fonts", "gai.conf", "host.conf",
	"inputrc", "ld.so.cache", "locale.alias", "localtime", "magic",
	"magic.mime", "matplotlibrc", "mime.types", "networks", "os-release",
	"protocols", "python3", "python3.11", "python3.12", "python3.13",
	"services", "ssl/certs", "ssl/openssl.cnf", "timezone",
}

// GeneratedEtc are files Warden writes itself, because the host's versions
// would name host users or point at resolvers the sandbox cannot reach.
func GeneratedEtc(hostname string) map[string]string {
	return map[string]string{
		"passwd":        "root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group":         "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n",
		"hostname":      hostname + "\n",
		"hosts":         fmt.Sprintf("127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost ip6-loopback\n", hostname),
		"nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\nservices: files\nprotocols: files\n",
		"resolv.conf":   "# The sandbox resolves no names itself.\n",
	}
}

// Device is a character device node by name and number.
type Device struct {
	Name         string
	Major, Minor uint32
}

// Devices are the device nodes bound into the sandbox's /dev, with the
// numbers the kernel gives them (Documentation/admin-guide/devices.txt):
// a node with any other number is not one of them. They carry no state
// and reach no hardware.
var Devices = []Device{
	{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9},
}

// DevLinks are the conventional /dev symlinks into /proc.
var DevLinks = map[string]string{
	"fd":     "/proc/self/fd",
	"stdin":  "/proc/self/fd/0",
	"stdout": "/proc/self/fd/1",
	"stderr": "/proc/self/fd/2",
}

// MaskedProcPaths are hidden (a file gets /dev/null bound over it, a
// directory an empty read-only tmpfs): they leak host kernel state or are
// known stepping stones in container escapes. The six after zoneinfo are
// host-wide counters (pressure stalls, scheduler and memory statistics,
// every process's file locks, and two figures the kernel sizes by the
// host's memory) that no program needs to size itself; those some program
// reads are replaced instead (ProcView). irq shows the host's CPU masks
// and fs its disks (ext4/vda), and no program needs either.
var MaskedProcPaths = []string{
	"acpi", "asound", "interrupts", "kcore", "keys", "key-users", "latency_stats",
	"sched_debug", "scsi", "timer_list", "timer_stats", "kallsyms", "kpagecgroup",
	"kpagecount", "kpageflags", "sysrq-trigger", "config.gz", "buddyinfo", "pagetypeinfo",
	"slabinfo", "vmallocinfo", "zoneinfo",
	"pressure", "schedstat", "vmstat", "locks", "sys/kernel/threads-max", "sys/vm/min_free_kbytes",
	"irq", "fs",
}

// ReadonlyProcPaths stay visible but read-only: programs read them, and no
// sandbox may write kernel-wide settings through them.
var ReadonlyProcPaths = []string{"bus", "sys"}

// Options is what the caller knows about one sandbox's file system.
type Options struct {
	// DiskBytes and Inodes size the tmpfs shared by /workspace, /tmp,
	// /home/sandbox and /dev/shm.
	DiskBytes int64
	Inodes    int64
	// WorkspaceFD is an open descriptor of the host directory to bind at
	// /workspace, or -1 for a private tmpfs. A descriptor rather than a path
	// so the directory the host checked is the one that gets mounted.
	WorkspaceFD int
	// WorkspaceIsMount says WorkspaceFD is a detached mount (made by the
	// host, idmapped) to move into place instead of a directory to bind.
	WorkspaceIsMount bool
	// HostScratch says WorkspaceFD is the whole scratch tmpfs, made by the
	// host with ScratchDirs in it, rather than the workspace alone.
	HostScratch bool
	// UID and GID own the writable directories.
	UID, GID int
	// Devices is the host directory the Devices are bound from (see
	// SharedDevices); empty binds the host's /dev ones (rootless).
	Devices string
	// View is what /proc and /sys show of the machine (see View).
	View View
	// Etc is the host's /etc template (see SharedEtc) to bind at /etc.
	Etc EtcTemplate
	// Image, when set, is the template's root tree the sandbox runs on
	// instead of the host's /usr and curated /etc (Etc is then unused).
	Image *ImageRoot
	// Hostname names the sandbox in the generated /etc files of a
	// template's root (the host's /etc template has its own).
	Hostname string
	// Seed, when set, copies a template's home and /workspace (from the
	// tree at tree) into the sandbox's fresh scratch tmpfs at scratch
	// (ScratchDirs in it) before the sandbox runs: only the workspace's
	// own when withWorkspace, since a host workspace is never written.
	// It is scratch.Seed's, which rootfs cannot import; a host scratch
	// (HostScratch) was seeded by the host.
	Seed func(scratch, tree string, withWorkspace bool) error
	// SeedFrom, when set, is the tree Seed copies from instead of Image:
	// a detached mount of it idmapped so the sandbox's user may read
	// every file (see nsinit.SeedFD), attached in the scratch only while
	// Seed runs.
	SeedFrom *ImageRoot
	// HomeFiles are written into the sandbox's fresh HOME, owned by the
	// sandbox user as the rest of it (the init writes them under its
	// file identity): copies of caches Warden built once for the root,
	// such as matplotlib's font list (see internal/fontcache), so that
	// no sandbox rebuilds them and none shares a writable file with
	// another. Only a root on the host's /usr gets them, and not with a
	// host scratch (HostScratch), whose HOME outlives the sandbox.
	HomeFiles []HomeFile
}

// HomeFile is one file of Options.HomeFiles: Path is relative to HOME
// and local (no "..", not absolute, clean), its missing parents are made
// 0755, and the file 0644.
type HomeFile struct {
	Path string `json:"path"`
	// Data is bytes, not a string, on the wire: JSON's base64 of 33 KB
	// costs a tenth of escaping it as a string.
	Data []byte `json:"data"`
}

// MaxHomeFiles bounds Options.HomeFiles' total size: the plan that carries
// them to warden-exec holds at most 1 MiB (plan.MaxBytes) whole.
const MaxHomeFiles = 512 << 10

// CheckHomeFiles refuses HomeFiles a sandbox's HOME cannot take: a path
// that is not local and clean, HOME itself ("."), one with a NUL (which
// the plan's C applier would cut short), or more than MaxHomeFiles bytes
// in all.
func CheckHomeFiles(files []HomeFile) error {
	total := 0
	for _, f := range files {
		if !filepath.IsLocal(f.Path) || filepath.Clean(f.Path) != f.Path || f.Path == "." || strings.ContainsRune(f.Path, 0) {
			return fmt.Errorf("home file %q: not a clean path inside HOME", f.Path)
		}
		total += len(f.Data)
	}
	if total > MaxHomeFiles {
		return fmt.Errorf("home files of %d bytes, over %d", total, MaxHomeFiles)
	}
	return nil
}

// ImageRoot is a template's root tree for Build: a descriptor of it that
// is either a detached mount (IsMount; root's, made by the host with
// open_tree) to move into place, or a directory opened in the sandbox's
// mount namespace to bind (rootless). It lives with Layout, which every
// platform compiles, so the tree builds off Linux too.
type ImageRoot struct {
	FD      int
	IsMount bool
}

// EtcTemplate is a sandbox's curated /etc, written once on the host and
// bound read-only into every native sandbox. Each init used to copy about
// 190 kB of allowlisted files into its own root: the largest single cost
// of building a sandbox, and pages every idle sandbox kept. Dir holds the
// copies, the generated files and empty mount points; Binds names the
// entries (directories and large files) bound live from the host's /etc
// over those mount points, as before.
type EtcTemplate struct {
	Dir   string   `json:"dir"`
	Binds []string `json:"binds,omitempty"`
}

// tmpfsData formats tmpfs mount options.
func tmpfsData(mode string, size, inodes int64, uid, gid int) string {
	opts := []string{"mode=" + mode, fmt.Sprintf("size=%d", size)}
	if inodes > 0 {
		opts = append(opts, fmt.Sprintf("nr_inodes=%d", inodes))
	}
	if uid >= 0 {
		opts = append(opts, fmt.Sprintf("uid=%d,gid=%d", uid, gid))
	}
	return strings.Join(opts, ",")
}

// ImageOwned are the top-level names of a template's root that Warden
// provides itself, as on the host's root: its /etc (the image's, under
// Warden's GeneratedEtc), /dev, /proc, the writable scratch (/tmp,
// /workspace, /home with the sandbox user's home) and an empty /run and
// /sys. Anything else at the image's top level is shown read-only as the
// image has it, except hidden names (a leading "."), which Warden uses
// for its own work and no program needs.
var ImageOwned = []string{"dev", "etc", "home", "proc", "run", "sys", "tmp", "workspace"}

// ImageEntryKind is what the sandbox root does with one top-level entry
// of a template's root.
type ImageEntryKind int

const (
	// ImageSkipped entries are Warden's own (ImageOwned), hidden, or of
	// a type a root has no use for at its top level (a device, a fifo).
	ImageSkipped ImageEntryKind = iota
	// ImageLink entries are symlinks (a usr-merged image's bin -> usr/bin),
	// recreated with the same target: it resolves inside the sandbox.
	ImageLink
	// ImageDir entries are directories, bound read-only.
	ImageDir
	// ImageFile entries are regular files, bound read-only.
	ImageFile
)

// ImageEntry classifies a template's top-level entry name of type mode
// (fs.FileMode's type bits).
func ImageEntry(name string, mode fs.FileMode) ImageEntryKind {
	if name == "" || strings.HasPrefix(name, ".") || strings.Contains(name, "/") || slices.Contains(ImageOwned, name) {
		return ImageSkipped
	}
	switch {
	case mode&fs.ModeSymlink != 0:
		return ImageLink
	case mode.IsDir():
		return ImageDir
	case mode.IsRegular():
		return ImageFile
	}
	return ImageSkipped
}

// EtcFD is where a plan holds the /etc template while the root is built
// (the template may sit where the root tmpfs is about to be mounted: a
// rootless user's is in /tmp). It is the first descriptor after those
// the host passes the init (nsinit's ControlFD to SeedFD, 3 to 7), low
// so that any RLIMIT_NOFILE a host may run under admits it; the op that
// opens it refuses one that is open, so a clash fails the start. The Go
// init, whose runtime holds low descriptors of its own, holds the
// template wherever it opens (Build).
const EtcFD = 8
