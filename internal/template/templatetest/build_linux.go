package templatetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// lockWait bounds how long Build waits for another process's build.
const lockWait = 30 * time.Minute

// Build returns the cache's build directory for the current key, building
// the images first when it has none (as root, with mmdebstrap), logging
// the build's progress to log. Concurrent callers, in this process or
// another, wait for one build.
func Build(ctx context.Context, log io.Writer) (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, key())
	if done(dir) {
		return dir, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("making cache %q: %w", cache, err)
	}
	unlock, err := lock(ctx, filepath.Join(cache, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if done(dir) {
		return dir, nil
	}
	if os.Geteuid() != 0 {
		return "", errors.New("building the test images needs root (run make test-images as root)")
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return "", errors.New("building the test images needs mmdebstrap (make deps installs it)")
	}
	return dir, build(ctx, cache, dir, log)
}

// done reports whether dir holds a finished build.
func done(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "packages.txt"))
	return err == nil
}

// lock takes the exclusive lock on file p, polling until ctx ends or
// lockWait passes, and returns its release.
func lock(ctx context.Context, p string) (func(), error) {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock %q: %w", p, err)
	}
	deadline := time.Now().Add(lockWait)
	for unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		if time.Now().After(deadline) || ctx.Err() != nil {
			f.Close()
			return nil, fmt.Errorf("waiting for another build of the test images (lock %q)", p)
		}
		time.Sleep(time.Second)
	}
	return func() { f.Close() }, nil
}

// build makes every image into dir, working in a scratch directory of
// cache that is renamed to dir only once all is written.
func build(ctx context.Context, cache, dir string, log io.Writer) error {
	work, err := os.MkdirTemp(cache, "build-")
	if err != nil {
		return fmt.Errorf("making build directory: %w", err)
	}
	if err := os.Chmod(work, 0o755); err != nil { // apt's downloads run as _apt
		return fmt.Errorf("opening build directory %q: %w", work, err)
	}
	defer func() {
		if err := os.RemoveAll(work); err != nil {
			fmt.Fprintf(log, "removing %s: %v\n", work, err)
		}
	}()
	base, full := filepath.Join(work, "base"), filepath.Join(work, "full")
	if err := bootstrap(ctx, base, full, log); err != nil {
		return err
	}
	if err := dropHostFiles(base, full); err != nil {
		return err
	}
	out := filepath.Join(work, "out")
	if err := writeImages(base, full, out); err != nil {
		return err
	}
	pk, err := exec.CommandContext(ctx, "chroot", full, "dpkg-query", "-W").Output()
	if err != nil {
		return fmt.Errorf("listing the packages built: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "packages.txt"), pk, 0o644); err != nil {
		return fmt.Errorf("writing packages.txt: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing stale %q: %w", dir, err)
	}
	return os.Rename(out, dir)
}

// bootstrap runs mmdebstrap once: the base packages, copied to base, then
// the extra packages installed on top, left in full.
func bootstrap(ctx context.Context, base, full string, log io.Writer) error {
	extra := extraPackages()
	if n := len(recipes) - 1; n != 1 || len(recipes[0].extra) != 0 {
		return fmt.Errorf("the build makes one base image and one image on it, not %d", n+1)
	}
	if err := os.Mkdir(base, 0o755); err != nil {
		return fmt.Errorf("making %q: %w", base, err)
	}
	args := []string{"--variant=apt", "--include=" + strings.Join(basePackages, ",")}
	for _, d := range []string{"man", "doc", "locale", "info"} {
		args = append(args, "--dpkgopt=path-exclude=/usr/share/"+d+"/*")
	}
	args = append(args,
		`--customize-hook=tar -C "$1" --one-file-system -cf - . | tar -C `+base+` -xf -`,
		`--customize-hook=chroot "$1" apt-get install -y -q --no-install-recommends `+strings.Join(extra, " "),
		suite, full, mirror)
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+strconv.Itoa(sourceDateEpoch))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mmdebstrap %s: %w", suite, err)
	}
	return nil
}

// hostFiles are the host's files mmdebstrap copies into a root (for
// debootstrap's sake) and leaves there: no image should carry the build
// host's name and resolver, and a sandbox gets its own.
var hostFiles = []string{"etc/resolv.conf", "etc/hostname"}

// dropHostFiles removes hostFiles from each root.
func dropHostFiles(roots ...string) error {
	for _, r := range roots {
		for _, f := range hostFiles {
			if err := os.Remove(filepath.Join(r, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("removing the build host's %s: %w", f, err)
			}
		}
	}
	return nil
}

// writeImages writes the base layer (all of base) and the layer from base
// to full beside out, and each image made of them under out.
func writeImages(base, full, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("making %q: %w", out, err)
	}
	baseLayer, topLayer := filepath.Join(out, "..", "base.tar.gz"), filepath.Join(out, "..", "top.tar.gz")
	if err := writeLayer(baseLayer, base, ""); err != nil {
		return fmt.Errorf("base layer: %w", err)
	}
	if err := writeLayer(topLayer, full, base); err != nil {
		return fmt.Errorf("second layer: %w", err)
	}
	for _, r := range recipes {
		files := []string{baseLayer}
		if len(r.extra) > 0 {
			files = append(files, topLayer)
		}
		img, err := assemble(files...)
		if err != nil {
			return err
		}
		if err := save(img, r.name, pathsIn(out, r.name)); err != nil {
			return err
		}
	}
	return nil
}
