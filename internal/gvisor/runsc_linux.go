package gvisor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// FindRunsc is the runsc binary warden runs for name: name itself (a
// path, or a command on PATH), or where name is empty DefaultRunsc where
// it is installed and else runsc on PATH. Warden runs it as root, so it
// returns the path with its symbolic links resolved, which warden then
// runs, only if no one but root (or warden's own user) can replace the
// file there, nor any directory above it (nsinit.OpenTrustedTree): it is
// run by that path again at each step of each box. Only a missing
// DefaultRunsc falls back to PATH; any other failure to read it is an
// error.
func FindRunsc(name string) (string, error) {
	if name == "" {
		name = "runsc"
		_, err := os.Stat(DefaultRunsc)
		switch {
		case err == nil:
			name = DefaultRunsc
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("runsc %s: %w (make runsc installs it, or pass --runsc PATH)", DefaultRunsc, err)
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("the gvisor backend needs runsc (make runsc installs the pinned one, or pass --runsc PATH): %w", err)
	}
	if p, err = filepath.Abs(p); err != nil {
		return "", fmt.Errorf("runsc %s: %w", name, err)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("runsc %s: %w", p, err)
	}
	f, err := nsinit.OpenTrustedTree(real)
	if err != nil {
		return "", fmt.Errorf("runsc %s: %w (make runsc installs a root-owned one as %s)", p, err, DefaultRunsc)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("runsc %s: %w", real, err)
	}
	return real, nil
}

// versionWait bounds `runsc --version`.
const versionWait = 10 * time.Second

// ReadRunscVersion asks the runsc at path for its version.
func ReadRunscVersion(ctx context.Context, path string) (RunscVersion, error) {
	ctx, cancel := context.WithTimeout(ctx, versionWait)
	defer cancel()
	var stdout, stderr versionOutput
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A child runsc left holding the output ends the wait all the same.
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return RunscVersion{}, fmt.Errorf("%s --version: %w: %q", path, err, firstLine(stderr.Bytes()))
	}
	v, ok := ParseRunscVersion(stdout.Bytes())
	if !ok {
		return RunscVersion{}, fmt.Errorf("%s --version: unexpected output %q", path, firstLine(stdout.Bytes()))
	}
	return v, nil
}
