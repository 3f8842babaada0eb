package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/warden-sandbox/warden/internal/gvisor"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spec"
)

// python is Debian's interpreter, the one every sandbox resolves
// python3 to, so the bare process runs the same program (a python3 of
// pyenv's first on PATH would start several times slower).
const python = "/usr/bin/python3"

// The user programs of the cold workloads.
var (
	printOne = []string{python, "-c", "print(1)"}
	plotPNG  = []string{python, "-c", "import io, numpy as np, matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt; " +
		"plt.plot(np.sin(np.linspace(0, 6, 50))); b = io.BytesIO(); plt.savefig(b, format='png'); print(len(b.getvalue()) > 0)"}
)

// contender runs a program cold. argv gives the command line for one
// run of prog; skipped says why it cannot run here.
type contender struct {
	name string
	argv func(prog []string) []string
	// run, when set, runs prog in-process instead of argv (an API call)
	// and returns its wall time in ms.
	run     func(prog []string) (float64, error)
	skipped string
	cleanup func()
}

// coldContenders are every way to start a program cold, baseline first.
func coldContenders(warden string) []*contender {
	cs := []*contender{
		bare(), wardenRun(warden, "native"), apiContender(warden, 0), apiContender(warden, apiPool),
		wardenRun(warden, "gvisor"), wardenRun(warden, "docker"),
		bwrap(), ociContender("runc", warden), ociContender("runsc", warden), dockerRun(warden),
	}
	return cs
}

// bare runs the program without isolation: every ratio's baseline.
func bare() *contender {
	return &contender{name: "bare", argv: func(p []string) []string { return p }}
}

// wardenRun runs the program with warden run on backend, skipped when a
// trial run fails.
func wardenRun(warden, backend string) *contender {
	c := &contender{name: "warden " + backend, argv: func(p []string) []string {
		return append([]string{warden, "run", "--backend", backend, "--"}, p...)
	}}
	if out, err := exec.Command(warden, "run", "--backend", backend, "--", "true").CombinedOutput(); err != nil {
		c.skipped = fmt.Sprintf("%v: %s", err, tail(out))
	}
	return c
}

func cleanupContenders(cs []*contender) {
	for _, c := range cs {
		if c.cleanup != nil {
			c.cleanup()
		}
	}
}

func bwrap() *contender {
	c := &contender{name: "bwrap --unshare-all", argv: func(p []string) []string {
		return append([]string{"bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
			"--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
			"--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--"}, p...)
	}}
	if _, err := exec.LookPath("bwrap"); err != nil {
		c.skipped = "bwrap not installed (apt-get install bubblewrap)"
	}
	return c
}

// ociContender runs the program as PID 1 of Warden's own bundle (the
// root template, its binds, the scratch tmpfs, the default limits, no
// network) with runc or runsc, a fresh container id each time: the raw
// tool doing what Warden's box does, without Warden.
func ociContender(tool, warden string) *contender {
	c := &contender{name: tool + " run"}
	if _, err := exec.LookPath(tool); err != nil {
		c.skipped = tool + " not installed (apt-get install " + tool + ")"
		return c
	}
	dir, err := os.MkdirTemp("", "warden-harness-"+tool+"-")
	if err != nil {
		c.skipped = err.Error()
		return c
	}
	scratch := filepath.Join(dir, "scratch")
	c.cleanup = func() {
		if err := rootfs.UnmountScratch(scratch); err != nil {
			fmt.Fprintf(os.Stderr, "cold-start bench: %v (doctor --leaks lists it)\n", err)
		}
		os.RemoveAll(dir)
	}
	t, err := rootfs.SharedTemplate(dir)
	if err == nil {
		err = rootfs.MountScratch(scratch, spec.DefaultLimits.DiskBytes, spec.DefaultLimits.Inodes(), 1000, 1000)
	}
	if err != nil {
		c.skipped = err.Error()
		return c
	}
	abs, _ := filepath.Abs(warden)
	var mu sync.Mutex
	n := 0
	// Each run gets a bundle of its own, as each Warden box gets a cgroup
	// of its own, so that concurrent runs do not share one.
	c.argv = func(p []string) []string {
		mu.Lock()
		n++
		id := fmt.Sprintf("h%d-%d", os.Getpid(), n)
		mu.Unlock()
		b := filepath.Join(dir, id)
		bundle := gvisor.Bundle{Root: t.Dir, Binds: t.Binds, Scratch: scratch, ScratchDirs: rootfs.ScratchDirs,
			Init: abs, InitPath: "/.warden/warden-init", Args: p, CgroupsPath: "warden/harness-" + id, Limits: spec.DefaultLimits}
		if err := writeBundle(b, bundle); err != nil {
			return []string{"sh", "-c", "echo " + err.Error() + "; exit 1"}
		}
		argv := []string{tool, "--root", filepath.Join(dir, "state")}
		if tool == "runsc" {
			argv = append(argv, "--network=none")
		}
		return append(argv, "run", "--bundle", b, id)
	}
	if out, err := exec.Command(c.argv([]string{"/bin/true"})[0], c.argv([]string{"/bin/true"})[1:]...).CombinedOutput(); err != nil {
		c.skipped = fmt.Sprintf("%s does not run here: %v: %s", tool, err, tail(out))
	}
	return c
}

// writeBundle writes b's config.json into dir, with the environment a
// Warden box's program gets.
func writeBundle(dir string, b gvisor.Bundle) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	s := b.Spec()
	s.Process.Env = []string{"PATH=/usr/bin:/bin", "HOME=/home/sandbox", "MPLBACKEND=Agg"}
	out, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), out, 0o644)
}

// dockerRun is `docker run --rm` of Warden's root image with the host's
// /usr, which is what Warden's docker boxes run.
func dockerRun(warden string) *contender {
	c := &contender{name: "docker run"}
	if err := exec.Command("docker", "version").Run(); err != nil {
		c.skipped = "no Docker engine answers"
		return c
	}
	// Only builds the image, whose presence is checked just below.
	_ = exec.Command(warden, "run", "--backend", "docker", "--", "true").Run()
	out, err := exec.Command("docker", "images", "--format", "{{.Repository}}:{{.Tag}}", "warden-root").Output()
	tags := strings.Fields(string(out))
	if err != nil || len(tags) == 0 {
		c.skipped = "no warden-root image (warden --backend docker failed)"
		return c
	}
	argv := []string{"docker", "run", "--rm", "--network", "none", "-e", "MPLBACKEND=Agg", "-v", "/usr:/usr:ro"}
	for _, e := range rootfs.EtcAllowlist {
		// The image has mount points where Warden binds /etc's
		// directories (alternatives, fonts, ...), as its boxes do.
		if fi, err := os.Stat("/etc/" + e); err == nil && fi.IsDir() {
			argv = append(argv, "-v", "/etc/"+e+":/etc/"+e+":ro")
		}
	}
	c.argv = func(p []string) []string { return append(append(append([]string(nil), argv...), tags[0]), p...) }
	return c
}

// time runs prog once on c and returns its wall time in ms.
func (c *contender) time(prog []string) (float64, error) {
	if c.run != nil {
		return c.run(prog)
	}
	return timeArgv(c.argv(prog))
}

// coldStart times prog on every contender, interleaved, after warm-ups.
func coldStart(cs []*contender, id, title string, prog []string, rounds int) Section {
	s := Section{ID: id, Title: title, Baseline: "bare"}
	rows := make([]Row, len(cs))
	for i, c := range cs {
		rows[i] = Row{Workload: id, Contender: c.name, Unit: "ms", Skipped: c.skipped}
	}
	for round := -2; round < rounds; round++ {
		for i, c := range cs {
			if rows[i].Skipped != "" {
				continue
			}
			d, err := c.time(prog)
			switch {
			case err != nil && round < 0:
				rows[i].Skipped = err.Error()
			case err != nil:
				rows[i].Errors++
			case round >= 0:
				rows[i].Samples = append(rows[i].Samples, d)
			}
		}
	}
	s.Rows = rows
	return s
}
