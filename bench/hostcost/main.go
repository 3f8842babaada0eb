//go:build linux

// Command hostcost measures the host CPU Warden spends reading a sandbox's
// output, outside the sandbox's cgroup, per unit of the CPU the sandbox is
// given (its quota times the wall time) and per unit it used (its Result's
// cpu_time_ms), for output floods:
//
//   - idle: `sleep`, no output: what any exec costs, the baseline;
//   - yes: `yes`, large writes as fast as the pipe takes them;
//   - bytes1: a loop of one-byte write(2) calls;
//   - py-yes, py-print: a Python cell running os.system("yes"), and one
//     printing a short line in a loop.
//
// Each runs for -secs (the exec's own timeout) at each of -cpus, through
// the one-shot CLI (`warden run`, the CLI process's own CPU, read from its
// zombie before it is reaped so the sandbox's processes are not counted),
// a session's exec and a stream of it whose client stops reading after the
// first event (the in-process server's own CPU, getrusage). Run it as root:
//
//	go build -o /tmp/warden ./cmd/warden && go run ./bench/hostcost -warden /tmp/warden
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/bench/wardenserve"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// init pins main to the main thread, which the sandbox init needs.
func init() { runtime.LockOSThread() }

// flood is one output pattern: a command, or Python code for a cell.
type flood struct {
	name    string
	command []string
	python  string
}

var floods = []flood{
	{name: "idle", command: []string{"sleep", "1000"}},
	{name: "yes", command: []string{"yes"}},
	{name: "bytes1", command: []string{"python3", "-c", "import os\nwhile True: os.write(1, b'x')"}},
	{name: "py-yes", python: "import os\nos.system('yes')"},
	{name: "py-print", python: "while True: print('x')"},
}

func main() {
	if len(os.Args) > 0 && os.Args[0] == nsinit.Arg0 {
		nsinit.Main()
	}
	warden := flag.String("warden", "", "warden binary for the CLI rows (none: skip them)")
	secs := flag.Float64("secs", 5, "seconds each flood runs")
	cpuList := flag.String("cpus", "0.1,1", "CPU quotas to measure, comma-separated")
	only := flag.String("floods", "", "floods to measure, comma-separated (default all)")
	latency := flag.Int("latency", 0, "instead, measure this many quick execs (echo, print) in a session")
	flag.Parse()
	if *latency > 0 {
		if err := quick(*latency); err != nil {
			fmt.Fprintln(os.Stderr, "hostcost:", err)
			os.Exit(1)
		}
		return
	}
	if *only != "" {
		floods = slices.DeleteFunc(floods, func(f flood) bool { return !slices.Contains(strings.Split(*only, ","), f.name) })
	}
	if err := run(*warden, time.Duration(*secs*float64(time.Second)), *cpuList); err != nil {
		fmt.Fprintln(os.Stderr, "hostcost:", err)
		os.Exit(1)
	}
}

// row is one measurement: host CPU, and the sandbox's quota and use.
type row struct {
	host, wall, sandbox time.Duration
	cpus                float64
}

func (r row) String() string {
	quota := r.cpus * r.wall.Seconds()
	used := "-"
	if r.sandbox > 0 {
		used = fmt.Sprintf("%.3f", r.host.Seconds()/r.sandbox.Seconds())
	}
	return fmt.Sprintf("%.0f ms | %.2f s | %.3f | %s", float64(r.host.Microseconds())/1000, r.wall.Seconds(), r.host.Seconds()/quota, used)
}

func run(warden string, d time.Duration, cpuList string) error {
	a, err := startAPI()
	if err != nil {
		return err
	}
	defer a.Close()
	fmt.Println("| flood | path | cpus | host CPU | wall | host / quota | host / sandbox CPU |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|")
	for _, c := range strings.Split(cpuList, ",") {
		cpus, err := strconv.ParseFloat(c, 64)
		if err != nil {
			return fmt.Errorf("-cpus %q: %w", c, err)
		}
		for _, f := range floods {
			if err := measure(a, warden, f, cpus, d); err != nil {
				return fmt.Errorf("%s at %v cpus: %w", f.name, cpus, err)
			}
		}
	}
	return nil
}

func measure(a *api, warden string, f flood, cpus float64, d time.Duration) error {
	if f.command != nil && warden != "" {
		r, err := cli(warden, f.command, cpus, d)
		if err != nil {
			return err
		}
		fmt.Printf("| %s | warden run | %g | %s |\n", f.name, cpus, r)
	}
	id, err := a.create(cpus)
	if err != nil {
		return err
	}
	defer a.call("DELETE", "/v1/sessions/"+id, nil, nil)
	body := map[string]any{"command": f.command, "timeout_seconds": d.Seconds()}
	if f.command == nil {
		body = map[string]any{"language": "python", "code": f.python, "timeout_seconds": d.Seconds()}
		// Start the interpreter first: its start is not the flood's cost.
		if err := a.call("POST", "/v1/sessions/"+id+"/exec", map[string]any{"language": "python", "code": "1"}, nil); err != nil {
			return err
		}
	}
	r, err := a.exec(id, body, cpus)
	if err != nil {
		return err
	}
	fmt.Printf("| %s | session exec | %g | %s |\n", f.name, cpus, r)
	r, err = a.stalled(id, body, cpus, d)
	if err != nil {
		return err
	}
	fmt.Printf("| %s | stalled stream | %g | %s |\n", f.name, cpus, r)
	return nil
}

// cli runs `warden run` and measures the CLI process alone: its times
// are read from /proc while it is a zombie, before the reaping adds its
// children's.
func cli(warden string, command []string, cpus float64, d time.Duration) (row, error) {
	args := append([]string{"run", "--json", "--cpus", fmt.Sprint(cpus), "--timeout", d.String(), "--"}, command...)
	cmd := exec.Command(warden, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return row{}, err
	}
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		return row{}, fmt.Errorf("waiting for warden run: %w", err)
	}
	host, err := procCPU(cmd.Process.Pid)
	if err != nil {
		return row{}, err
	}
	_ = cmd.Wait()
	var res spec.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return row{}, fmt.Errorf("warden run's result: %w", err)
	}
	return row{host: host, wall: msDur(res.WallTimeMS), sandbox: msDur(res.CPUTimeMS), cpus: cpus}, nil
}

// procCPU is the user and system time of pid itself (fields 14 and 15 of
// /proc/<pid>/stat), without its children.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100, nil
}

func msDur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// selfCPU is this process's user and system time, all threads.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// api is one in-process server on loopback.
type api struct{ *wardenserve.InProcess }

func startAPI() (*api, error) {
	p, err := wardenserve.StartInProcess(sandbox.Config{MaxSessions: 8})
	if err != nil {
		return nil, err
	}
	return &api{p}, nil
}

func (a *api) post(path string, body any) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest("POST", a.Base+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return http.DefaultClient.Do(req)
}

// call sends method with body as JSON and decodes the answer into out,
// call sends method with body as JSON and decodes the answer into out.
func (a *api) call(method, path string, body, out any) error {
	return a.Do(context.Background(), method, path, body, out)
}

func (a *api) create(cpus float64) (string, error) {
	var s struct{ ID string }
	err := a.call("POST", "/v1/sessions", map[string]any{"limits": map[string]any{"cpus": cpus}}, &s)
	return s.ID, err
}

// exec runs body in session id and measures the server's CPU over it.
func (a *api) exec(id string, body map[string]any, cpus float64) (row, error) {
	before := selfCPU()
	var res spec.Result
	if err := a.call("POST", "/v1/sessions/"+id+"/exec", body, &res); err != nil {
		return row{}, err
	}
	return row{host: selfCPU() - before, wall: msDur(res.WallTimeMS), sandbox: msDur(res.CPUTimeMS), cpus: cpus}, nil
}

// stalled streams body, reads the first event and stops reading until the
// exec's own timeout is past, and measures the server's CPU meanwhile.
func (a *api) stalled(id string, body map[string]any, cpus float64, d time.Duration) (row, error) {
	before := selfCPU()
	begin := time.Now()
	resp, err := a.post("/v1/sessions/"+id+"/exec/stream", body)
	if err != nil {
		return row{}, err
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		resp.Body.Close()
		return row{}, fmt.Errorf("first event: %w", err)
	}
	time.Sleep(d + 500*time.Millisecond - time.Since(begin))
	host := selfCPU() - before
	wall := time.Since(begin)
	resp.Body.Close()
	// Wait for the session to be free again for the next row.
	for i := 0; i < 100; i++ {
		if err := a.call("POST", "/v1/sessions/"+id+"/exec", map[string]any{"command": []string{"true"}}, nil); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return row{host: host, wall: wall, cpus: cpus}, nil
}

// quick measures the latency of n quick execs with a little output, a
// command and a Python cell, in one session: what the pacing must not
// slow down.
func quick(n int) error {
	a, err := startAPI()
	if err != nil {
		return err
	}
	defer a.Close()
	id, err := a.create(1)
	if err != nil {
		return err
	}
	for _, body := range []map[string]any{
		{"command": []string{"echo", "hi"}},
		{"language": "python", "code": "print('hi')"},
	} {
		var times []time.Duration
		for i := 0; i < n+1; i++ {
			begin := time.Now()
			var res spec.Result
			if err := a.call("POST", "/v1/sessions/"+id+"/exec", body, &res); err != nil {
				return err
			}
			if res.Stdout != "hi\n" {
				return fmt.Errorf("exec %v: stdout %q", body, res.Stdout)
			}
			if i > 0 { // the first starts the interpreter
				times = append(times, time.Since(begin))
			}
		}
		slices.Sort(times)
		fmt.Printf("%v: median %v, p90 %v over %d\n", body, times[len(times)/2], times[len(times)*9/10], n)
	}
	return nil
}
