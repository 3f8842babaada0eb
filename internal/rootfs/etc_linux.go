package rootfs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// etcFormat is part of every template's name: a change to how templates
// are written must not reuse one written the old way (v1 could be written
// with the creator's umask; v3 is root's own mount, which a v2 directory
// of the same content is not; v3 mounts could be written with the umask).
const etcFormat = "etc-v4"

// SharedEtc returns the /etc template for hostname under base, writing it
// if this host's /etc has none yet. A template is named by the metadata
// of every allowlisted entry (inode, size, mode, change and modification
// times, link target) and the generated files, so finding the current one
// costs a few dozen lstat calls; an /etc that changed gets a new template
// and running sandboxes keep the one they bound. One that lost entries
// (a temporary-file cleaner ages out what nobody reads) is replaced.
// base must belong to this user and be writable by nobody else; it is
// made 0755, as the sandbox's mapped user must reach the template.
// With ownMounts (root only) each template is a read-only tmpfs of its
// own: a sandbox's /proc/self/mountinfo shows a bind's path within its
// file system, which is then "/" rather than the template's host path.
// log gets the warning of a damaged template that could not be removed,
// which nobody waits on (nil: slog.Default()).
func SharedEtc(base, hostname string, ownMounts bool, log *slog.Logger) (EtcTemplate, error) {
	if err := ownedDir(base); err != nil {
		return EtcTemplate{}, err
	}
	entries, sum := planEtc(hostname)
	t := EtcTemplate{Dir: filepath.Join(base, "etc-"+sum), Binds: boundNames(entries)}
	if checked.recent(t.Dir) || intact(t.Dir, entries, hostname) {
		checked.mark(t.Dir)
		return t, nil
	}
	discard(t.Dir, log)
	publish := publishEtc
	if ownMounts {
		publish = mountEtc
	}
	if err := publish(base, t.Dir, entries, hostname); err != nil {
		return t, fmt.Errorf("writing /etc template: %w", err)
	}
	checked.mark(t.Dir)
	return t, nil
}

// checked is the template last found intact and when, so that a server
// starting many sandboxes looks it over at most once a second: damage
// comes from slow things such as a cleaner of temporary files.
var checked lastCheck

type lastCheck struct {
	mu  sync.Mutex
	dir string
	at  time.Time
}

func (c *lastCheck) recent(dir string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dir == dir && time.Since(c.at) < time.Second
}

func (c *lastCheck) mark(dir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dir, c.at = dir, time.Now()
}

// publishEtc writes the template into a temporary directory and renames
// it to dir; if another Warden got there first, its template is used.
func publishEtc(base, dir string, entries []etcEntry, hostname string) error {
	tmp, err := os.MkdirTemp(base, "tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := writeEtc(tmp, entries, hostname); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil && !intact(dir, entries, hostname) {
		return err
	}
	return nil
}

// mountEtc writes the template into a detached tmpfs, makes it read-only
// and attaches it at dir. A Warden that finds dir already intact leaves
// it; two attaching at once stack identical templates, and either serves.
func mountEtc(_, dir string, entries []etcEntry, hostname string) error {
	mnt, err := detachedTmpfs(map[string]string{"mode": "0755", "size": "16m", "nr_inodes": "4096"}, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return err
	}
	defer closeFD(mnt, "the /etc template's tmpfs")
	if err := writeEtc("/proc/self/fd/"+strconv.Itoa(mnt), entries, hostname); err != nil {
		return err
	}
	if err := unix.MountSetattr(mnt, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("making the template read-only: %w", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if intact(dir, entries, hostname) {
		return nil
	}
	if err := unix.MoveMount(mnt, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attaching the template at %q: %w", dir, err)
	}
	return nil
}

// boundNames are the entries bound live from the host rather than copied.
func boundNames(entries []etcEntry) []string {
	var names []string
	for _, e := range entries {
		if e.kind == entryBound {
			names = append(names, e.name)
		}
	}
	return names
}

// intact says dir holds every entry of the template as it was written,
// with the modes fixModes gives (a template written under a strict umask
// is unreadable to the sandboxes and must not be reused).
func intact(dir string, entries []etcEntry, hostname string) bool {
	if !hasMode(dir, unix.S_IFDIR) {
		return false
	}
	for _, e := range entries {
		if strings.Contains(e.name, "/") && !hasMode(filepath.Join(dir, filepath.Dir(e.name)), unix.S_IFDIR) {
			return false
		}
		if !hasMode(filepath.Join(dir, e.name), e.fileType()) {
			return false
		}
	}
	for name := range GeneratedEtc(hostname) {
		if !hasMode(filepath.Join(dir, name), unix.S_IFREG) {
			return false
		}
	}
	return true
}

// hasMode says p is of type typ (S_IFMT) with the permissions fixModes
// gives that type: 0755 for a directory, 0644 for a file (a link has none).
func hasMode(p string, typ uint32) bool {
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT != typ {
		return false
	}
	switch typ {
	case unix.S_IFDIR:
		return st.Mode&0o7777 == 0o755
	case unix.S_IFREG:
		return st.Mode&0o7777 == 0o644
	}
	return true
}

// discard moves a damaged template aside and removes it. Sandboxes that
// bound it keep what they have; a concurrent Warden that moved it first
// leaves nothing to do.
func discard(dir string, log *slog.Logger) {
	aside := fmt.Sprintf("%s.damaged-%d", dir, os.Getpid())
	if os.Rename(dir, aside) == nil {
		if err := os.RemoveAll(aside); err != nil {
			// Aside, no sandbox binds it; only its disk is lost.
			if log == nil {
				log = slog.Default()
			}
			log.Warn("removing a damaged /etc template", "dir", aside, "err", err)
		}
	}
}

// ownedDir makes dir (0755) if missing and refuses it unless it is a real
// directory of this user that no one else may write: anyone who could
// would choose what every sandbox sees as /etc.
func ownedDir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%s is not a directory: remove it", dir)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s belongs to uid %d, not to this user: remove it", dir, st.Uid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%s may be written by others (mode %o): remove it", dir, st.Mode&0o777)
	case st.Mode&0o777 != 0o755:
		// Made under a strict umask: the sandboxes could not reach it.
		return os.Chmod(dir, 0o755)
	}
	return nil
}

// entryKind is what a template does with one host entry.
type entryKind int

const (
	entrySkipped entryKind = iota // missing, or not for every user's eyes
	entryLink                     // a symlink, recreated
	entryCopied                   // a small regular file, copied
	entryBound                    // a directory or large file, bound live
)

// etcEntry is one allowlisted /etc entry as the host has it.
type etcEntry struct {
	name   string
	kind   entryKind
	target string // a link's
	dir    bool   // a bound entry is a directory
}

// fileType is the S_IFMT type of the entry's stand-in in a template.
func (e etcEntry) fileType() uint32 {
	switch {
	case e.kind == entryLink:
		return unix.S_IFLNK
	case e.dir:
		return unix.S_IFDIR
	}
	return unix.S_IFREG
}

// classify says what a template does with host path src: a symlink is
// recreated, a small world-readable file copied, a world-readable
// directory or large file bound, anything else left out. Only what every
// user of the host may read goes in, as a sandbox user reading it would
// see it, so every directory above src must let others through as well.
// st is src's metadata.
func classify(src string, open searchable) (e etcEntry, st unix.Stat_t) {
	if !open.reach(filepath.Dir(src)) || unix.Lstat(src, &st) != nil {
		return e, st
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		if target, err := os.Readlink(src); err == nil {
			e.kind, e.target = entryLink, target
		}
	case unix.S_IFDIR:
		if st.Mode&0o004 != 0 {
			e.kind, e.dir = entryBound, true
		}
	case unix.S_IFREG:
		switch {
		case st.Mode&0o004 == 0:
		case st.Size <= maxCopiedFile:
			e.kind = entryCopied
		default:
			e.kind = entryBound
		}
	}
	return e, st
}

// searchable remembers which directories every user may search, together
// with each directory above them, over one pass: the allowlist's entries
// share a few parents.
type searchable map[string]bool

// reach says every user may search dir and each directory above it.
func (m searchable) reach(dir string) bool {
	if ok, seen := m[dir]; seen {
		return ok
	}
	var st unix.Stat_t
	ok := unix.Stat(dir, &st) == nil && st.Mode&0o001 != 0
	if ok && dir != "/" && dir != "." {
		ok = m.reach(filepath.Dir(dir))
	}
	m[dir] = ok
	return ok
}

// planEtc classifies every allowlisted entry and names the result.
func planEtc(hostname string) ([]etcEntry, string) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00", etcFormat, maxCopiedFile)
	var entries []etcEntry
	open := searchable{}
	for _, name := range EtcAllowlist {
		e, st := classify("/etc/"+name, open)
		e.name = name
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00%d %d %o %d %d.%d %d.%d\x00", name, e.kind, e.target,
			st.Dev, st.Ino, st.Mode, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
		if e.kind != entrySkipped {
			entries = append(entries, e)
		}
	}
	gen := GeneratedEtc(hostname)
	for _, name := range slices.Sorted(maps.Keys(gen)) {
		fmt.Fprintf(h, "%s\x00%s\x00", name, gen[name])
	}
	return entries, hex.EncodeToString(h.Sum(nil)[:8])
}

// writeEtc fills dir with the template's entries and generated files.
func writeEtc(dir string, entries []etcEntry, hostname string) error {
	for _, e := range entries {
		dst := filepath.Join(dir, e.name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := writeEntry(dst, "/etc/"+e.name, e); err != nil {
			return fmt.Errorf("/etc/%s: %w", e.name, err)
		}
	}
	for name, content := range GeneratedEtc(hostname) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return fixModes(dir)
}

// fixModes makes every directory in the template 0755 and every file
// 0644 whatever the umask they were created under: the sandbox's mapped
// user reads them as "others". The walk starts at dir's contents ("dir/"):
// a detached template is reached through /proc/self/fd/N, a symlink that
// WalkDir would not descend.
func fixModes(dir string) error {
	return filepath.WalkDir(dir+string(filepath.Separator), func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return os.Chmod(p, 0o755)
		case d.Type().IsRegular():
			return os.Chmod(p, 0o644)
		}
		return nil
	})
}

// writeEntry makes what e says at dst: a link, a copy of src, or a mount
// point for src's bind (an empty directory or file).
func writeEntry(dst, src string, e etcEntry) error {
	switch e.kind {
	case entryLink:
		return os.Symlink(e.target, dst)
	case entryCopied:
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	case entryBound:
		if e.dir {
			return os.MkdirAll(dst, 0o755)
		}
		return os.WriteFile(dst, nil, 0o644)
	}
	return nil
}
