package vmguest

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/strictjson"
)

// Boot is the one message the host sends after the guest's hello: what
// the guest init does next. The host is not the guest's threat, but the
// message is parsed as strictly as everything else on the port: a fixed
// head, a bounded length, JSON with no unknown field, every tag and path
// checked before anything is mounted.
type Boot struct {
	// Echo makes the guest echo the port back until the host closes it,
	// and nothing else: how the launcher's tests prove and measure the
	// port without a box.
	Echo bool `json:"echo,omitempty"`
	// Root is the 9p tag of the box's root tree (the template's
	// directory with its binds, assembled on the host), mounted read-only
	// as the box's /.
	Root string `json:"root,omitempty"`
	// Scratch is the 9p tag of the writable scratch: its directories
	// named in ScratchDirs go to their places in the box.
	Scratch     string            `json:"scratch,omitempty"`
	ScratchDirs map[string]string `json:"scratch_dirs,omitempty"`
	// VarTmp binds the scratch's tmp at /var/tmp too (a template image's
	// own /var/tmp, rootfs.ImageVarTmp).
	VarTmp bool `json:"var_tmp,omitempty"`
	// Hostname is the box's host name, which the guest kernel holds (a
	// runtime sets a container's; here the guest init does).
	Hostname string `json:"hostname,omitempty"`
	// Cache is the 9p cache mode of the read-only shares (the scratch's
	// is always "none": the host's file API writes it too).
	Cache string `json:"cache,omitempty"`
	// MemoryBytes is the box's --memory: the memory.max of the cgroup v2
	// the guest init makes and moves itself into before it becomes the
	// agent, so the agent and everything it forks are held to it, as
	// native's cgroup holds its box (the VM's RAM is more: the guest
	// kernel's own need on top).
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
}

// bootMagic opens the boot message, so a guest tells it from stray bytes.
const bootMagic = "WRDNBOOT"

// MaxBoot bounds the boot message's JSON: a root, a scratch and its
// directories take a few hundred bytes.
const MaxBoot = 64 << 10

// Bounds on what a boot message names.
const (
	maxTag         = 31 // the 9p mount tag QEMU and the guest agree on
	maxPath        = 256
	maxScratchDirs = 16
	// maxMemory bounds MemoryBytes from above (spec.MinMemoryBytes from
	// below): 1 TiB is past any VM this backend boots.
	maxMemory = 1 << 40
)

// cacheModes are the 9p cache modes a read-only share may ask for.
var cacheModes = []string{"none", "loose", "fscache", "mmap"}

// ErrBadBoot marks a boot message the guest refuses.
var ErrBadBoot = errors.New("bad microVM boot message")

// Marshal returns b's frame: the magic, Version, the JSON's length and
// the JSON. It checks b first, so the host never sends what the guest
// would refuse.
func (b Boot) Marshal() ([]byte, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	body, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("encoding the boot message: %w", err)
	}
	if len(body) > MaxBoot {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrBadBoot, len(body), MaxBoot)
	}
	out := append([]byte(bootMagic), binary.BigEndian.AppendUint32(nil, Version)...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(body)))
	return append(out, body...), nil
}

// ReadBoot reads exactly one boot message from r and checks it. It reads
// nothing past the message: what follows on the port is the agent's.
func ReadBoot(r io.Reader) (Boot, error) {
	var head [len(bootMagic) + 8]byte
	if n, err := io.ReadFull(r, head[:]); err != nil {
		return Boot{}, fmt.Errorf("reading the boot message (%d of %d bytes): %w", n, len(head), err)
	}
	if string(head[:len(bootMagic)]) != bootMagic {
		return Boot{}, fmt.Errorf("%w: starts %s, not %q", ErrBadBoot, quote(head[:len(bootMagic)]), bootMagic)
	}
	if v := binary.BigEndian.Uint32(head[len(bootMagic):]); v != Version {
		return Boot{}, fmt.Errorf("%w: version %d, this guest speaks %d: rebuild the initramfs from this warden", ErrBadBoot, v, Version)
	}
	size := binary.BigEndian.Uint32(head[len(bootMagic)+4:])
	if size > MaxBoot {
		return Boot{}, fmt.Errorf("%w: %d bytes, more than %d", ErrBadBoot, size, MaxBoot)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return Boot{}, fmt.Errorf("reading the boot message's %d bytes: %w", size, err)
	}
	var b Boot
	if err := strictjson.Decode(body, &b); err != nil {
		return Boot{}, fmt.Errorf("%w: %w", ErrBadBoot, err)
	}
	return b, b.check()
}

// check refuses a message that is neither an echo nor a whole box, or
// names a tag or path the guest would not mount.
func (b Boot) check() error {
	if b.Echo {
		if b.Root != "" || b.Scratch != "" || len(b.ScratchDirs) > 0 || b.VarTmp || b.Cache != "" || b.Hostname != "" || b.MemoryBytes != 0 {
			return fmt.Errorf("%w: an echo boot names a box too", ErrBadBoot)
		}
		return nil
	}
	if err := checkTag(b.Root, "root"); err != nil {
		return err
	}
	if err := checkTag(b.Scratch, "scratch"); err != nil {
		return err
	}
	if err := CheckTag(b.Hostname); err != nil {
		return fmt.Errorf("%w: host name: %w", ErrBadBoot, err)
	}
	if !slices.Contains(cacheModes, b.Cache) {
		return fmt.Errorf("%w: cache mode %q is none of %s", ErrBadBoot, b.Cache, strings.Join(cacheModes, ", "))
	}
	if len(b.ScratchDirs) > maxScratchDirs {
		return fmt.Errorf("%w: %d scratch directories, more than %d", ErrBadBoot, len(b.ScratchDirs), maxScratchDirs)
	}
	for name, dst := range b.ScratchDirs {
		if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." || len(name) > maxTag {
			return fmt.Errorf("%w: scratch directory name %q is not one plain name", ErrBadBoot, name)
		}
		if err := checkPath(dst, "scratch directory "+name); err != nil {
			return err
		}
		if dst == "/" {
			return fmt.Errorf("%w: scratch directory %q over the root", ErrBadBoot, name)
		}
	}
	if b.MemoryBytes < spec.MinMemoryBytes || b.MemoryBytes > maxMemory {
		return fmt.Errorf("%w: memory limit %d bytes is not %d-%d", ErrBadBoot, b.MemoryBytes, int64(spec.MinMemoryBytes), int64(maxMemory))
	}
	return nil
}

// checkTag accepts a 9p tag CheckTag accepts.
func checkTag(tag, what string) error {
	if err := CheckTag(tag); err != nil {
		return fmt.Errorf("%w: %s %w", ErrBadBoot, what, err)
	}
	return nil
}

// CheckTag accepts a 9p mount tag of 1-31 lower-case letters, digits and
// '-': what the guest mounts by, and what QEMU's option parser takes
// without escaping.
func CheckTag(tag string) error {
	if tag == "" || len(tag) > maxTag {
		return fmt.Errorf("tag %q must be 1-%d bytes", tag, maxTag)
	}
	for _, r := range tag {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return fmt.Errorf("tag %q holds %q; use a-z, 0-9 and -", tag, r)
		}
	}
	return nil
}

// checkPath accepts an absolute, clean path without NUL.
func checkPath(p, what string) error {
	if p == "" || len(p) > maxPath || p[0] != '/' || path.Clean(p) != p || strings.ContainsRune(p, 0) {
		return fmt.Errorf("%w: %s %q is not a clean absolute path of at most %d bytes", ErrBadBoot, what, p, maxPath)
	}
	return nil
}
