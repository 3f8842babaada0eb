package main

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/warden-sandbox/warden/bench/measure"
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
	run func(prog []string) (float64, error)
	// usage, when set, reads the CPU in ms spent so far by everything
	// that serves run (a server, its helpers and its sandboxes); a
	// contender with argv is charged its run's rusage instead.
	usage func() (float64, error)
	// acct, while a cold workload runs, is the cpuacct cgroup each run of
	// argv is born in (nil: its CPU is wait4's rusage).
	acct *measure.AcctGroup
	// cpuNote, when set, says why the contender's CPU per run is not
	// measured.
	cpuNote string
	skipped string
	cleanup func()
	// fatal, when set, is why the harness cannot go on (exitOnFatal).
	fatal error
}

// coldContenders are every way to start a program cold, baseline first.
func coldContenders(warden string) []*contender {
	cs := []*contender{
		bare(), wardenRun(warden, "native"), wardenRunGo(warden), apiContender(warden, 0), apiContender(warden, apiPool),
		wardenRun(warden, "gvisor"), wardenRun(warden, "docker"),
		bwrap(), ociContender("runc", warden), ociContender("runsc", warden), dockerRun(warden),
	}
	exitOnFatal(cs)
	return cs
}

// exitOnFatal stops the harness, after stopping what cs started, when a
// contender could not be made without harm to every later figure (a
// server's cgroup the harness could not leave).
func exitOnFatal(cs []*contender) {
	for _, c := range cs {
		if c.fatal != nil {
			cleanupContenders(cs)
			log.Fatalf("harness: %s: %v", c.name, c.fatal)
		}
	}
}

// bare runs the program without isolation: every ratio's baseline.
func bare() *contender {
	return &contender{name: bareName, argv: func(p []string) []string { return p }}
}

// wardenRun runs the program with warden run on backend (named runName
// on native, which the targets read), skipped when a trial run fails.
func wardenRun(warden, backend string) *contender {
	name := "warden " + backend
	if backend == "native" {
		name = runName
	}
	c := &contender{name: name, argv: func(p []string) []string {
		return append([]string{warden, "run", "--backend", backend, "--"}, p...)
	}}
	if backend == "docker" {
		c.cpuNote = "warden's own only: the engine runs the container"
	}
	if out, err := exec.Command(warden, "run", "--backend", backend, "--", "true").CombinedOutput(); err != nil {
		c.skipped = fmt.Sprintf("%v: %s", err, tail(out))
	}
	return c
}

// wardenRunGo is warden run with the Go init (--executor go), beside the
// default (auto, warden-exec where it can) so that one run shows what the
// fast executor gains. It is skipped when the warden refuses the flag, or
// has no warden-exec beside it (then auto is the Go init too).
func wardenRunGo(warden string) *contender {
	c := &contender{name: runGoName, argv: func(p []string) []string {
		return append([]string{warden, "run", "--executor", "go", "--"}, p...)
	}}
	exe := filepath.Join(filepath.Dir(warden), "warden-exec")
	if _, err := os.Stat(exe); err != nil {
		c.skipped = fmt.Sprintf("no %s (make build builds it where a C compiler is installed): the default is the Go init too", exe)
		return c
	}
	if out, err := exec.Command(warden, "run", "--executor", "go", "--", "true").CombinedOutput(); err != nil {
		c.skipped = fmt.Sprintf("this warden refuses --executor go: %v: %s", err, tail(out))
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
	c := &contender{name: bwrapName, argv: func(p []string) []string {
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
	bin, err := exec.LookPath(tool)
	if tool == "runsc" {
		// The runsc warden's gvisor boxes run (the pinned one where
		// make runsc installed it), so that the two compare alike.
		bin, err = gvisor.FindRunsc("")
	}
	if err != nil {
		c.skipped = tool + " not found: " + err.Error()
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
		argv := []string{bin, "--root", filepath.Join(dir, "state")}
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
	c := &contender{name: "docker run", cpuNote: "the client's only: the engine runs the container"}
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

// time runs prog once on c and returns its wall time in ms, and the CPU
// it cost in ms where that is known per run (-1 where it is not).
func (c *contender) time(prog []string) (wall, cpu float64, err error) {
	if c.run != nil {
		wall, err = c.run(prog)
		return wall, -1, err
	}
	if c.acct != nil {
		return timeInGroup(c.argv(prog), c.acct)
	}
	return timeArgv(c.argv(prog))
}

// timeOnly runs prog once on c and returns its wall time in ms, for runs
// at once: one born in c.acct (a burst's group) is not waited for to
// settle, as the others share the group.
func (c *contender) timeOnly(prog []string) (float64, error) {
	switch {
	case c.run != nil:
		return c.run(prog)
	case c.acct != nil:
		return startInGroup(c.argv(prog), c.acct)
	}
	wall, _, err := timeArgv(c.argv(prog))
	return wall, err
}

// groupRuns gives each contender that runs command lines, and whose CPU
// is measured, a cpuacct cgroup of its own for its runs (AcctGroup.Start),
// or notes on its row that its CPU is wait4's rusage, which misses what
// outlives the command; done removes the groups.
func groupRuns(cs []*contender, rows []Row, id string) (done func()) {
	for i, c := range cs {
		if c.argv == nil || c.cpuNote != "" || c.skipped != "" {
			continue
		}
		g, err := measure.NewAcctGroup(fmt.Sprintf("warden-harness-%d-%s-%d", os.Getpid(), id, i))
		if err != nil {
			rows[i].Note = rusageNote + ", no cpuacct cgroup: " + err.Error()
			continue
		}
		c.acct = g
	}
	return func() {
		for _, c := range cs {
			if c.acct != nil {
				c.acct.Remove()
				c.acct = nil
			}
		}
	}
}

// coldStart times prog on every contender, interleaved, after warm-ups,
// and charges each measured run its CPU: what the cgroup its command was
// born in spent (groupRuns), or for a contender with usage what its
// server's tree spent between the run's start and the start of its next
// run (groupMeter).
func coldStart(cs []*contender, id, title string, prog []string, rounds int) Section {
	s := Section{ID: id, Title: title, Baseline: bareName, Compare: bwrapName}
	rows := make([]Row, len(cs))
	meters := make([]groupMeter, len(cs))
	for i, c := range cs {
		rows[i] = Row{Workload: id, Contender: c.name, Unit: "ms", Skipped: c.skipped}
		if c.cpuNote != "" {
			rows[i].Note = "CPU not measured: " + c.cpuNote
		}
		meters[i].usage = c.usage
	}
	defer groupRuns(cs, rows, id)()
	for round := -2; round < rounds; round++ {
		for i, c := range cs {
			if rows[i].Skipped != "" {
				continue
			}
			if round >= 0 {
				meters[i].start(&rows[i])
			}
			wall, cpu, err := c.time(prog)
			switch {
			case err != nil && round < 0:
				rows[i].Skipped = err.Error()
			case err != nil:
				rows[i].Errors++
				meters[i].drop()
			case round >= 0:
				rows[i].Samples = append(rows[i].Samples, wall)
				if cpu >= 0 && c.cpuNote == "" {
					rows[i].CPU = append(rows[i].CPU, cpu)
				}
			}
		}
	}
	for i := range cs {
		meters[i].end(&rows[i])
	}
	s.Rows = rows
	return s
}

// groupMeter turns a contender's cumulative CPU (its usage) into one
// sample per run: each run is charged what the tree spent from the run's
// start to the start of the contender's next run (or the end of the
// rounds), which takes in the work a run leaves behind, such as a pool
// refilling, and the server's idle CPU over the round.
type groupMeter struct {
	usage   func() (float64, error)
	mark    float64
	pending bool
}

// start closes the previous run's charge and opens one at this run.
func (m *groupMeter) start(row *Row) {
	m.end(row)
	if m.usage == nil {
		return
	}
	u, err := m.usage()
	if err != nil {
		row.Note = "CPU not measured: " + err.Error()
		return
	}
	m.mark, m.pending = u, true
}

// drop forgets the open charge, of a run that failed.
func (m *groupMeter) drop() { m.pending = false }

// end adds the open charge, if any, to row's CPU samples, or says on
// row why it could not.
func (m *groupMeter) end(row *Row) {
	if !m.pending {
		return
	}
	m.pending = false
	u, err := m.usage()
	if err != nil {
		row.Note = "CPU not measured: " + err.Error()
		return
	}
	row.CPU = append(row.CPU, u-m.mark)
}
