package plan

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// measureEnv turns on TestDrainFloodCost, a measurement rather than a
// check: it takes a minute of both cores.
const measureEnv = "WARDEN_MEASURE_DRAIN"

// optimizedExecutor builds warden-exec as make build does (no
// sanitizers), for figures that are the shipped binary's.
func optimizedExecutor(t *testing.T) string {
	t.Helper()
	srcs, _ := filepath.Glob(filepath.Join(execSources, "*.c"))
	bin := filepath.Join(t.TempDir(), "warden-exec")
	args := append([]string{"-O2", "-Wall", "-Wextra", "-Werror", "-fstack-protector-strong", "-static", "-o", bin}, srcs...)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("building warden-exec: %v: %s", err, out)
	}
	return bin
}

// floodRun runs the plan with warden-exec, its fd 1 read by wc -c as a
// host would read it, and returns the CPU time of the
// reader and of the executor's whole tree (PID 1 and the program it
// reaped), and how many bytes the reader got.
func floodRun(t *testing.T, bin string, frame []byte) (reader, executor time.Duration, got int64) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, child := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "child")
	defer host.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var count strings.Builder
	cat := exec.Command("wc", "-c")
	cat.Stdin, cat.Stdout = r, &count
	if err := cat.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	cmd := exec.Command(bin)
	cmd.ExtraFiles = []*os.File{child}
	cmd.Stdout = w
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	w.Close()
	if err := Send(host, frame); err != nil {
		t.Fatal(err)
	}
	st, err := ReadStatus(host)
	if werr := cmd.Wait(); werr != nil {
		t.Fatalf("the executor: %v", werr)
	}
	if err != nil || st.Kind != StatusRan || st.ExitCode != 0 {
		t.Fatalf("status %+v, %v", st, err)
	}
	if err := cat.Wait(); err != nil {
		t.Fatalf("the reader: %v", err)
	}
	if got, err = strconv.ParseInt(strings.TrimSpace(count.String()), 10, 64); err != nil {
		t.Fatal(err)
	}
	return cat.ProcessState.UserTime() + cat.ProcessState.SystemTime(),
		cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), got
}

// TestDrainFloodCost measures what a `yes` flood of 1 GB costs the host's
// reader and the sandbox, with the output drained in the box (a Drain op,
// limit 1 MiB) and without (the program writes to the host's pipe, whose
// reader reads it all, as a host that drops output past its limit does).
// Rounds interleave the two; it logs medians and ratios.
func TestDrainFloodCost(t *testing.T) {
	if os.Getenv(measureEnv) == "" {
		t.Skip("a measurement: set " + measureEnv + "=1 to run it")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a PID namespace")
	}
	bin := optimizedExecutor(t)
	const limit, flood = 1 << 20, 1 << 30
	path := Op{Code: Env, Strs: []string{"PATH=/usr/bin:/bin"}}
	yes := program("sh", "-c", "yes | head -c "+strconv.Itoa(flood))
	drained := encode(t, &Plan{Ops: []Op{path, {Code: Drain, Ints: []uint64{limit, limit}}, yes}})
	direct := encode(t, &Plan{Ops: []Op{path, yes}})
	rounds, _ := strconv.Atoi(os.Getenv(measureEnv))
	rounds = max(rounds, 5)
	var rd, ed, rn, en []time.Duration
	for range rounds {
		r, e, got := floodRun(t, bin, drained)
		if got != limit+1 {
			t.Errorf("drained: the reader got %d bytes, want %d", got, limit+1)
		}
		rd, ed = append(rd, r), append(ed, e)
		r, e, got = floodRun(t, bin, direct)
		if got != flood {
			t.Errorf("direct: the reader got %d bytes, want %d", got, flood)
		}
		rn, en = append(rn, r), append(en, e)
	}
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	t.Logf("%d rounds, medians of CPU time: drained: reader %v, sandbox %v (reader/sandbox %.4f); direct: reader %v, sandbox %v (reader/sandbox %.3f); reader drained/direct %.4f",
		rounds, med(rd), med(ed), float64(med(rd))/float64(med(ed)), med(rn), med(en), float64(med(rn))/float64(med(en)), float64(med(rd))/float64(med(rn)))
}
