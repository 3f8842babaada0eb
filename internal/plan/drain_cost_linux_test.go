package plan

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// measureEnv turns on TestDrainFloodCost, a measurement rather than a
// check: it takes a minute of both cores.
const measureEnv = "WARDEN_MEASURE_DRAIN"

// optimizedExecutor builds warden-exec as make build does (no
// sanitizers), for figures that are the shipped binary's.
func optimizedExecutor(t *testing.T) string {
	t.Helper()
	return testhost.Executor(t)
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
	var stderr strings.Builder // a pipe, as DRAIN requires
	cmd.Stderr = &stderr
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

// costs is one way of running a flood, and the medians it measured.
type costs struct {
	name        string
	frame       []byte
	want        int64
	reader, box []time.Duration
	wall        []time.Duration
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

// TestDrainFloodCost measures what output costs the host's reader and the
// sandbox: a `yes` flood of 1 GB with the output drained in the box (a
// Drain op, limit 1 MiB) and without (the program writes to the host's
// pipe, whose reader reads it all, as a host that drops output past its
// limit does), and 256 MiB relayed whole by the drain against written
// straight to the host. Rounds interleave the ways; it logs medians and
// ratios against the direct way.
func TestDrainFloodCost(t *testing.T) {
	if os.Getenv(measureEnv) == "" {
		t.Skip("a measurement: set " + measureEnv + "=1 to run it")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a PID namespace")
	}
	bin := optimizedExecutor(t)
	const limit, flood, whole = 1 << 20, 1 << 30, 256 << 20
	path := Op{Code: Env, Strs: []string{"PATH=/usr/bin:/bin"}}
	yes := func(n int) Op { return program("sh", "-c", "yes | head -c "+strconv.Itoa(n)) }
	drain := func(l uint64) Op { return Op{Code: Drain, Ints: []uint64{l, l}} }
	ways := []*costs{
		{name: "flood drained", frame: encode(t, &Plan{Ops: []Op{path, drain(limit), yes(flood)}}), want: limit + 1},
		{name: "flood direct", frame: encode(t, &Plan{Ops: []Op{path, yes(flood)}}), want: flood},
		{name: "whole relayed", frame: encode(t, &Plan{Ops: []Op{path, drain(1 << 40), yes(whole)}}), want: whole},
		{name: "whole direct", frame: encode(t, &Plan{Ops: []Op{path, yes(whole)}}), want: whole},
	}
	rounds, _ := strconv.Atoi(os.Getenv(measureEnv))
	rounds = max(rounds, 5)
	for range rounds {
		for _, w := range ways {
			start := time.Now()
			r, e, got := floodRun(t, bin, w.frame)
			w.wall = append(w.wall, time.Since(start))
			if got != w.want {
				t.Errorf("%s: the reader got %d bytes, want %d", w.name, got, w.want)
			}
			w.reader, w.box = append(w.reader, r), append(w.box, e)
		}
	}
	for i, w := range ways {
		base := ways[i/2*2+1]
		ratio := func(a, b []time.Duration) float64 { return float64(median(a)) / float64(median(b)) }
		t.Logf("%s, medians of %d rounds: reader CPU %v (%.4fx), sandbox CPU %v (%.2fx), wall %v (%.2fx)", w.name, rounds,
			median(w.reader), ratio(w.reader, base.reader), median(w.box), ratio(w.box, base.box), median(w.wall), ratio(w.wall, base.wall))
	}
}
