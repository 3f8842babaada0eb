package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/doctor"
	"github.com/warden-sandbox/warden/internal/nsinit"
)

// versionWait bounds asking warden-server for its build.
const versionWait = 10 * time.Second

// binaryChecks reports the two binaries installed beside warden (at exe):
// present, trusted (nsinit.OpenTrusted) and of this build. Neither is
// needed by a run, so a problem is a warning: without warden-init warden
// is its own init, a little slower; without warden-server the slim build
// cannot serve.
func binaryChecks(ctx context.Context, exe string) []doctor.Check {
	dir := filepath.Dir(exe)
	return []doctor.Check{
		binaryCheck(ctx, filepath.Join(dir, serverName), "serve, session and mcp are unavailable from the slim warden", serverSameBuild),
		binaryCheck(ctx, filepath.Join(dir, nsinit.InitName), "warden runs itself as each sandbox's init, a little slower", func(_ context.Context, f *os.File) error {
			return nsinit.Probe(f.Name())
		}),
	}
}

// binaryCheck is the line for the binary at p: missing, untrusted or of
// another build (sameBuild, given the trusted descriptor) is a warning
// saying what that costs (without) and how to fix it.
func binaryCheck(ctx context.Context, p, without string, sameBuild func(context.Context, *os.File) error) doctor.Check {
	c := doctor.Check{Name: filepath.Base(p), Status: doctor.Warn, Fix: "install bin/ whole from one build (make build), as files in a directory owned by root that only root can write"}
	f, err := nsinit.OpenTrusted(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.Detail = fmt.Sprintf("not installed beside warden (%s): %s", p, without)
		return c
	case err != nil:
		c.Detail = fmt.Sprintf("%v: %s", err, without)
		return c
	}
	defer closeOrWarn(f)
	if err := sameBuild(ctx, f); err != nil {
		c.Detail = fmt.Sprintf("another build: %v", err)
		return c
	}
	c.Status, c.Detail, c.Fix = doctor.OK, fmt.Sprintf("%s: present, trusted, this build", p), ""
	return c
}

// serverSameBuild runs the warden-server open at f as a hand-over of
// `version` would, which it refuses when of another build (checkHandoff).
// It runs the descriptor checked, passed as the child's descriptor 3.
func serverSameBuild(ctx context.Context, f *os.File) error {
	ctx, cancel := context.WithTimeout(ctx, versionWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/fd/3", "version")
	cmd.Args[0] = f.Name()
	cmd.ExtraFiles = []*os.File{f}
	cmd.Env = handoffEnviron()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s version: %w: %s", f.Name(), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func closeOrWarn(f *os.File) {
	if err := f.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "warden: closing %s: %v\n", f.Name(), err)
	}
}

// microVMBootCheck boots one microVM with the warden-init beside exe as
// the guest's /init.
func microVMBootCheck(ctx context.Context, exe string) doctor.Check {
	return doctor.MicroVMBoot(ctx, filepath.Join(filepath.Dir(exe), nsinit.InitName))
}
