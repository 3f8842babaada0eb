package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/warden-sandbox/warden/internal/gvisor"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spec"
)

// rawTool is the command a backend's own tool runs for /bin/true, with
// what it needs made first and removed by the returned func.
func rawTool(backend, warden string) (*contender, func(), error) {
	switch backend {
	case "native":
		return &contender{name: "/bin/true (bare)", argv: []string{"/bin/true"}}, func() {}, nil
	case "gvisor":
		return runscBundle(warden)
	case "docker":
		img, err := rootImage(warden)
		if err != nil {
			return nil, nil, err
		}
		return &contender{name: "docker run --rm (Warden's root image) /bin/true",
			argv: []string{"docker", "run", "--rm", "--network", "none", "-v", "/usr:/usr:ro", img, "/bin/true"}}, func() {}, nil
	}
	return nil, nil, fmt.Errorf("unknown backend %q", backend)
}

// runscBundle writes Warden's bundle for /bin/true: the same root
// template, binds, scratch tmpfs and limits as a Warden box.
func runscBundle(warden string) (*contender, func(), error) {
	if _, err := exec.LookPath("runsc"); err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "warden-bench-runsc-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() {
		_ = rootfs.UnmountScratch(filepath.Join(dir, "scratch"))
		os.RemoveAll(dir)
	}
	t, err := rootfs.WriteTemplate(filepath.Join(dir, "root"))
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	if err := rootfs.MountScratch(filepath.Join(dir, "scratch"), spec.DefaultLimits.DiskBytes, spec.DefaultLimits.Inodes(), 1000, 1000); err != nil {
		cleanup()
		return nil, nil, err
	}
	abs, _ := filepath.Abs(warden)
	b := gvisor.Bundle{Root: t.Dir, Binds: t.Binds, Scratch: filepath.Join(dir, "scratch"), ScratchDirs: rootfs.ScratchDirs,
		Init: abs, InitPath: "/.warden/warden-init", Args: []string{"/bin/true"}, CgroupsPath: "/warden/bench-runsc", Limits: spec.DefaultLimits}
	cfg, err := json.Marshal(b.Spec())
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o600)
	}
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return &contender{name: "runsc run (Warden's bundle, /bin/true as PID 1)",
		argv: []string{"runsc", "--root", filepath.Join(dir, "state"), "--network=none", "run", "--bundle", dir, idMark}}, cleanup, nil
}

// rootImage is the tag of Warden's root image, made by a first run.
func rootImage(warden string) (string, error) {
	if out, err := exec.Command(warden, "run", "--backend", "docker", "--", "/bin/true").CombinedOutput(); err != nil {
		return "", fmt.Errorf("warden --backend docker: %v: %s", err, out)
	}
	out, err := exec.CommandContext(context.Background(), "docker", "images", "--format", "{{.Repository}}:{{.Tag}}", "warden-root").Output()
	if err != nil {
		return "", err
	}
	tags := strings.Fields(string(out))
	if len(tags) == 0 {
		return "", fmt.Errorf("no warden-root image")
	}
	return tags[0], nil
}
