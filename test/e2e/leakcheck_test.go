package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/spec"
)

// hostTraces is what Warden could leave on the host, counted.
type hostTraces struct {
	mounts, tmp       []string
	inits, netns, cgs int
	runEntries        int
}

func snapshotTraces(t *testing.T) hostTraces {
	t.Helper()
	h := hostTraces{mounts: mountLines(t), tmp: wardenTmpEntries(t)}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	nets := map[string]bool{}
	for _, p := range procs {
		if cmd, err := os.ReadFile(p + "/cmdline"); err == nil && len(cmd) > 0 && string(cmd[:min(len(cmd), 11)]) == "warden-init" {
			h.inits++
		}
		if ns, err := os.Readlink(p + "/ns/net"); err == nil {
			nets[ns] = true
		}
	}
	h.netns = len(nets)
	for _, parent := range cgroup.Parents() {
		dirs, _ := filepath.Glob(filepath.Join(parent, "[0-9]*-*"))
		h.cgs += len(dirs)
	}
	for _, d := range []string{"/run/warden/egress", "/run/warden/gvisor", "/run/warden/docker"} {
		ents, _ := os.ReadDir(d)
		h.runEntries += len(ents)
	}
	return h
}

// TestLeakCheck runs many one-shot runs (CLI) and session create, exec,
// delete cycles (API), then checks that nothing is left: processes,
// cgroups, mounts, network namespaces, the server's descriptors, tmp
// entries, state entries. The long form is the 10,000 runs and
// 2,000 cycles.
func TestLeakCheck(t *testing.T) {
	runs, cycles := 100, 50
	if *longLoad {
		runs, cycles = 10000, 2000
	}
	requireSandbox(t)
	before := snapshotTraces(t)
	start := time.Now()
	var failed atomic.Int64
	var wg sync.WaitGroup
	var next atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(runs) {
				if out, err := exec.Command(wardenBin, "run", "--", "sh", "-c", "echo ok >/workspace/f && cat /workspace/f").CombinedOutput(); err != nil || string(out) != "ok\n" {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	runTime := time.Since(start)

	s := startServer(t, "--start-rate", "0") // the long form's cycles go past any burst
	c := newClient(s)
	// One cycle first: the server keeps its spawner (a socket and a
	// pidfd) from its first session on.
	if err := sessionCycle(c); err != nil {
		t.Fatalf("a first session cycle: %v", err)
	}
	c.hc.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond)
	fds0 := fdCount(s.pid)
	start = time.Now()
	var cycleErrs []string
	for i := 0; i < cycles; i++ {
		if err := sessionCycle(c); err != nil {
			cycleErrs = append(cycleErrs, err.Error())
			if len(cycleErrs) > 10 {
				break
			}
		}
	}
	cycleTime := time.Since(start)
	// The client's kept-alive connection is one of the server's fds.
	c.hc.CloseIdleConnections()
	time.Sleep(500 * time.Millisecond)
	fds1 := fdCount(s.pid)
	s.stop()
	after := snapshotTraces(t)

	t.Logf("%d one-shot runs in %s (%d failed); %d session cycles in %s (%d failed)", runs, runTime.Round(time.Millisecond), failed.Load(), cycles, cycleTime.Round(time.Millisecond), len(cycleErrs))
	t.Logf("server descriptors: %d before the cycles, %d after", fds0, fds1)
	t.Logf("inits %d→%d, cgroups %d→%d, netns %d→%d, mounts %d→%d, /run/warden entries %d→%d", before.inits, after.inits, before.cgs, after.cgs, before.netns, after.netns, len(before.mounts), len(after.mounts), before.runEntries, after.runEntries)
	if failed.Load() > 0 || len(cycleErrs) > 0 {
		t.Errorf("%d runs and %d cycles failed: %q", failed.Load(), len(cycleErrs), cycleErrs)
	}
	if fds1 > fds0 {
		t.Errorf("the server holds %d descriptors after the cycles, %d before", fds1, fds0)
	}
	for _, c := range []struct {
		what          string
		before, after int
	}{
		{"sandbox inits", before.inits, after.inits},
		{"sandbox cgroups", before.cgs, after.cgs},
		{"network namespaces", before.netns, after.netns},
		{"entries under /run/warden", before.runEntries, after.runEntries},
	} {
		if c.after > c.before {
			t.Errorf("%s: %d before, %d after", c.what, c.before, c.after)
		}
	}
	if added := addedMounts(t, before.mounts, after.mounts); len(added) > 0 {
		t.Errorf("mounts left: %q", added)
	}
	if added := addedLines(before.tmp, after.tmp); len(added) > 0 {
		t.Errorf("tmp entries left: %q", added)
	}
}

// sessionCycle creates a session, runs one exec in it and deletes it.
func sessionCycle(c *client) error {
	id, err := c.create(nil)
	if err != nil {
		return err
	}
	var r spec.Result
	if err := c.json("POST", "/v1/sessions/"+id+"/exec", map[string]any{"command": []string{"sh", "-c", "echo ok"}}, &r, http.StatusOK); err != nil {
		return err
	}
	if r.Stdout != "ok\n" {
		return fmt.Errorf("exec said %q", r.Stdout)
	}
	code, b, err := c.do("DELETE", "/v1/sessions/"+id, "", nil)
	if err != nil || code != http.StatusNoContent {
		return fmt.Errorf("delete = %d %s %v", code, b, err) //nolint:errorlint // err may be nil (a bad status alone): %v prints it, %w would not
	}
	return nil
}

func fdCount(pid int) int {
	ents, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(ents)
}
