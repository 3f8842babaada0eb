package rootfs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Template is the native root as data on the host, for backends whose
// runtime builds the box from a directory and a list of mounts (gVisor,
// Docker): the same symlinks, the same curated /etc, the same empty
// mount points. Dir holds the small files; Binds are the directories (and
// the few special files) to bind read-only at their path, from the same
// path under From.
type Template struct {
	Dir   string
	Binds []string
	// From is the host directory Binds are found under (a template's
	// tree, SharedImageTemplate); empty means the host's root.
	From string
	// VarTmp says the scratch's tmp is bound at /var/tmp too, over the
	// image's read-only directory (ImageVarTmp).
	VarTmp bool
}

// MountPoints are the directories a runtime mounts over in every box.
var MountPoints = []string{"proc", "dev", "dev/shm", "tmp", "workspace", "home/sandbox", "usr", ".warden", "run"}

// WriteTemplate writes the template into dir, which must not exist yet.
// Only what every user of the host may read is copied or bound, as the
// native init, reading as the sandbox user, would see it.
func WriteTemplate(dir string) (Template, error) {
	t := Template{Dir: dir, Binds: []string{"/usr"}}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return t, err
	}
	for _, d := range append(MountPoints, "etc") {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return t, err
		}
	}
	for _, name := range UsrMergeLinks {
		if err := t.mirrorTo("/"+name, filepath.Join(dir, name)); err != nil {
			return t, fmt.Errorf("mirroring /%s: %w", name, err)
		}
	}
	entries, _ := planEtc("sandbox")
	if err := writeEtc(filepath.Join(dir, "etc"), entries, "sandbox"); err != nil {
		return t, fmt.Errorf("writing /etc: %w", err)
	}
	for _, name := range boundNames(entries) {
		t.Binds = append(t.Binds, "/etc/"+name)
	}
	return t, nil
}

// mirrorTo is mirror for a template: what classify says, with every
// bound entry listed in Binds to be bound at the same path.
func (t *Template) mirrorTo(src, dst string) error {
	e, _ := classify(src, searchable{})
	if e.kind == entryBound {
		t.Binds = append(t.Binds, src)
	}
	return writeEntry(dst, src, e)
}

// SharedTemplate writes the template under base once for every Warden:
// it is written to base/tmp-<pid>, named by a hash of its content
// (base/root-<hash>), and an identical one already there is used instead,
// so concurrent and later Wardens share it and a host whose /etc changed
// gets a new one. A Warden that dies mid-write leaves only its tmp-<pid>.
func SharedTemplate(base string) (Template, error) {
	tmp := filepath.Join(base, fmt.Sprintf("tmp-%d", os.Getpid()))
	// What this Warden cannot remove of an earlier attempt makes
	// WriteTemplate fail, and that error says where.
	_ = os.RemoveAll(tmp)
	t, err := WriteTemplate(tmp)
	if err != nil {
		return t, errors.Join(err, os.RemoveAll(tmp))
	}
	sum, err := hashTree(tmp)
	if err != nil {
		return t, errors.Join(err, os.RemoveAll(tmp))
	}
	t.Dir = filepath.Join(base, "root-"+sum)
	if err := os.Rename(tmp, t.Dir); err != nil {
		// A tmp left here is removed by this Warden's next attempt, or as
		// stale once it has died; the template in place is used anyway.
		_ = os.RemoveAll(tmp)
		if _, serr := os.Stat(t.Dir); serr != nil {
			return t, err
		}
	}
	return t, nil
}

// hashTree is a digest of every path, mode, link target and file content
// under dir, in walk order.
func hashTree(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%o\x00", rel, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s\x00", target)
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%d\x00", len(b))
			h.Write(b)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)[:8]), err
}
