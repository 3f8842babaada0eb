package vmkernel

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/strictjson"
)

// Bounds on what Find reads from the cache: it is root's, but a corrupt
// or planted entry must fail cleanly, not exhaust the reader.
const (
	maxEntries  = 64
	maxManifest = 1024
	maxVmlinux  = 256 << 20
)

// manifest is kernel-<key>/manifest.json as build.sh writes it.
type manifest struct {
	Key    string `json:"key"`
	Inputs string `json:"inputs"`
	Source string `json:"source"`
	Built  string `json:"built"`
}

// cache is a kernel cache directory whose every entry must belong to
// uid (root, for Dir) and be writable by it alone.
type cache struct {
	dir string
	uid int
}

// find returns the newest kernel in the cache built from inputs.
func (c cache) find(inputs string) (Kernel, error) {
	f, err := c.open()
	if errors.Is(err, os.ErrNotExist) {
		return Kernel{}, errMissing()
	}
	if err != nil {
		return Kernel{}, err
	}
	defer f.Close()
	names, err := c.list(f)
	if err != nil {
		return Kernel{}, err
	}
	var found Kernel
	for _, name := range names {
		if !strings.HasPrefix(name, "kernel-") {
			continue // the build's work and prune directories, an old lock
		}
		k, m, err := c.read(f, name)
		if err != nil {
			return Kernel{}, err
		}
		if m.Inputs == inputs && k.Built.After(found.Built) {
			found = k
		}
	}
	if found.Vmlinux == "" {
		return Kernel{}, errMissing()
	}
	return found, nil
}

// open checks the cache directory and its ancestors and opens it.
func (c cache) open() (*os.File, error) {
	if err := c.checkAncestors(); err != nil {
		return nil, err
	}
	fd, err := unix.Open(c.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the microVM kernel cache %q: %w", c.dir, err)
	}
	f := os.NewFile(uintptr(fd), c.dir)
	if _, err := c.checkOwned(f, unix.S_IFDIR); err != nil {
		closeLogged(f)
		return nil, err
	}
	return f, nil
}

// list returns the names in the cache directory f, at most maxEntries.
func (c cache) list(f *os.File) ([]string, error) {
	names, err := f.Readdirnames(maxEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("listing the microVM kernel cache %q: %w", c.dir, err)
	}
	if len(names) > maxEntries {
		return nil, fmt.Errorf("microVM kernel cache %q has more than %d entries: remove it and run `make microvm-kernel`", c.dir, maxEntries)
	}
	return names, nil
}

// read checks the kernel directory name in the cache directory f and
// reads its manifest and checks its files: anything amiss is an error
// naming what to remove.
func (c cache) read(f *os.File, name string) (Kernel, manifest, error) {
	d, _, err := c.openAt(f, name, unix.O_DIRECTORY, unix.S_IFDIR)
	if err != nil {
		return Kernel{}, manifest{}, err
	}
	defer closeLogged(d)
	b, err := c.readFile(d, "manifest.json", maxManifest)
	if err != nil {
		return Kernel{}, manifest{}, err
	}
	var m manifest
	if err := strictjson.Decode(b, &m); err != nil {
		return Kernel{}, manifest{}, badManifest(d, err)
	}
	built, err := m.check(name)
	if err != nil {
		return Kernel{}, manifest{}, badManifest(d, err)
	}
	for _, file := range []string{"vmlinux", "config"} {
		kf, err := c.openFile(d, file)
		if err != nil {
			return Kernel{}, manifest{}, err
		}
		closeLogged(kf)
	}
	k := Kernel{
		Vmlinux: filepath.Join(d.Name(), "vmlinux"), Config: filepath.Join(d.Name(), "config"),
		Key: m.Key, Source: m.Source, Built: built, cache: c, name: name,
	}
	return k, m, nil
}

// open opens the checked vmlinux of k, checking the cache, its ancestors
// and k's directory again on the way: see Kernel.Open.
func (k Kernel) open() (*os.File, error) {
	if k.name == "" {
		return nil, errors.New("opening the microVM kernel: not a kernel Find returned")
	}
	f, err := k.cache.open()
	if err != nil {
		return nil, err
	}
	defer closeLogged(f)
	d, _, err := k.cache.openAt(f, k.name, unix.O_DIRECTORY, unix.S_IFDIR)
	if err != nil {
		return nil, err
	}
	defer closeLogged(d)
	return k.cache.openFile(d, "vmlinux")
}

// badManifest is the error for the kernel directory d's bad manifest.
func badManifest(d *os.File, err error) error {
	return fmt.Errorf("microVM kernel manifest in %q: %w: remove the directory and run `make microvm-kernel`", d.Name(), err)
}

// check validates m's fields and that they name the directory name.
func (m manifest) check(name string) (time.Time, error) {
	switch {
	case !isHexKey(m.Key):
		return time.Time{}, fmt.Errorf("key %q is not a sha256", m.Key)
	case !isHexKey(m.Inputs):
		return time.Time{}, fmt.Errorf("inputs %q is not a sha256", m.Inputs)
	case !isSourceVersion(m.Source):
		return time.Time{}, fmt.Errorf("source %q is not a package version", m.Source)
	case Key(m.Inputs, m.Source) != m.Key:
		return time.Time{}, fmt.Errorf("key %s is not the hash of its inputs and source", m.Key)
	case name != "kernel-"+m.Key:
		return time.Time{}, fmt.Errorf("key %s does not name the directory", m.Key)
	}
	built, err := time.Parse(time.RFC3339, m.Built)
	if err != nil {
		return time.Time{}, fmt.Errorf("built %q is not an RFC 3339 time", m.Built)
	}
	return built, nil
}
