// Package fontcache keeps matplotlib's font list built once per root, so
// that a sandbox's fresh HOME starts with it and `import
// matplotlib.pyplot` does not run fc-list and scan every font again (about
// 65 ms of CPU on Debian 12, in every sandbox).
//
// matplotlib (3.6) reads $XDG_CACHE_HOME/matplotlib/fontlist-vNNN.json,
// ~/.cache/matplotlib/... without it, where NNN is its
// FontManager.__version__, and trusts the file if the `_version` inside
// matches: it checks nothing else. So the store keys each list by what
// the list is made from (Key): the matplotlib packages the root holds
// (their font_manager.py and version files), the font directories it
// scans and fc-list reports (/usr/share/fonts, /usr/local/share/fonts
// and their directories, matplotlib's mpl-data/fonts, each directory by
// inode and mtime, which is how fontconfig notices a font added or
// removed) and
// fontconfig's configuration (/etc/fonts). fontconfig's own
// cache (/var/cache/fontconfig) changes how fast fc-list answers, not what
// it lists, and a sandbox does not see it.
//
// The list is built by Warden in a sandbox of the root that runs nothing
// but `import matplotlib.font_manager` (see internal/native), read back
// from that sandbox's HOME as hostile input (ReadResult) and kept
// root-owned under Warden's cache directory, the record of the current
// key only, written by an atomic rename. Each sandbox gets a copy in its own HOME
// (rootfs.Options.HomeFiles): nothing writable is shared.
package fontcache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"sync"
)

// MaxBytes bounds a font list: Debian 12's is 33 KB; it travels in the
// sandbox's plan, which holds 1 MiB (rootfs.MaxHomeFiles is its share).
const MaxBytes = 512 << 10

// Dir is where matplotlib looks for the list, relative to HOME, when
// neither MPLCONFIGDIR nor XDG_CACHE_HOME says otherwise (Warden sets
// neither).
const Dir = ".cache/matplotlib"

// File is a built font list: Name is its file name (fontlist-vNNN.json),
// Data its content. The zero File is the answer for a root whose clean
// build gave no list (its python has no matplotlib): stored too, so that
// such a root costs no build on every run. A build that failed stores
// nothing (see Store.Attempted).
type File struct {
	Name string
	Data []byte
}

// None says f is the answer "no list for this root".
func (f File) None() bool { return f.Name == "" }

// namePattern is the only name a font list may have; its number is
// matplotlib's FontManager.__version__.
var namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^fontlist-v([0-9]{1,6})\.json$`) })

// check refuses a File that matplotlib would not take as a font list of
// its name, or one too large to copy into a sandbox: its content came
// out of a sandbox.
func (f File) check() error {
	if err := f.checkName(); err != nil || f.None() {
		return err
	}
	m := namePattern().FindStringSubmatch(f.Name)
	var head struct {
		Version json.Number `json:"_version"`
	}
	if err := json.Unmarshal(f.Data, &head); err != nil {
		return fmt.Errorf("font list %q: not a JSON object: %w", f.Name, err)
	}
	if want, _ := strconv.Atoi(m[1]); head.Version.String() != strconv.Itoa(want) {
		return fmt.Errorf("font list %q: its _version is %q, not its name's %d", f.Name, head.Version, want)
	}
	return nil
}

// checkName refuses a File whose name is not a font list's, or that is
// too large to copy into a sandbox: all that is checked of a record the
// store's owner wrote after check (parsing the list would cost each run
// a millisecond).
func (f File) checkName() error {
	if f.None() {
		return nil
	}
	if !namePattern().MatchString(f.Name) {
		return fmt.Errorf("font list %q: not a name matplotlib gives its font list (fontlist-vNNN.json)", f.Name)
	}
	if len(f.Data) > MaxBytes {
		return fmt.Errorf("font list %q: %d bytes, over %d", f.Name, len(f.Data), MaxBytes)
	}
	return nil
}

// recordMagic opens every record in the store, followed by the list's
// name and a newline, then its content (none for the "no list" answer).
const recordMagic = "WFONT1\n"

// encode is f as a record.
func (f File) encode() []byte {
	return append([]byte(recordMagic+f.Name+"\n"), f.Data...)
}

// decode reads a record made by encode (and checked by Save).
func decode(b []byte) (File, error) {
	rest, ok := bytes.CutPrefix(b, []byte(recordMagic))
	if !ok {
		return File{}, errors.New("not a font cache record")
	}
	name, data, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return File{}, errors.New("a font cache record without its name line")
	}
	f := File{Name: string(name), Data: data}
	if f.None() && len(data) > 0 {
		return File{}, errors.New("a font cache record with content but no name")
	}
	if err := f.checkName(); err != nil {
		return File{}, err
	}
	return f, nil
}

// Key names a root's font list in the store: a digest of what the list
// is made from, or None when the root holds no matplotlib.
type Key struct {
	Sum  string
	None bool
}

// Store keeps built font lists, a record named by its Key, in a
// directory only its owner (root) may change.
type Store struct {
	Dir string
}

// DefaultStore is root's store under Warden's cache directory; ok is
// false for anyone else: the build needs a host tmpfs (see
// internal/native), which only root mounts.
func DefaultStore() (s Store, ok bool) {
	if os.Geteuid() != 0 {
		return Store{}, false
	}
	return Store{Dir: "/var/cache/warden/fonts"}, true
}
