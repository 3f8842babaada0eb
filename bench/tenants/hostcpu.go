package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os/exec"
	"time"

	"github.com/warden-sandbox/warden/bench/measure"
	"github.com/warden-sandbox/warden/bench/wardenserve"
)

// CPURow is what one hostile pattern cost the host outside its sandbox,
// per unit of the CPU quota the sandbox was given.
type CPURow struct {
	Mode    string  `json:"mode"`
	Pattern string  `json:"pattern"`
	CPUs    float64 `json:"cpus"`
	// WallS is the sandbox's (or the exec loop's) wall time; QuotaS is
	// CPUs × WallS, the CPU time the sandbox was entitled to.
	WallS  float64 `json:"wall_s"`
	QuotaS float64 `json:"quota_s"`
	// SandboxS is what the sandbox's cgroup used.
	SandboxS float64 `json:"sandbox_s"`
	// HostS is the CPU time outside the sandbox's cgroups: for the CLI,
	// warden run's own (SelfS) plus the init's threads outside the
	// cgroup (the children's time less the cgroup's); for the API, the
	// server's, its spawner's and inits' threads outside the cgroups.
	HostS float64 `json:"host_s"`
	SelfS float64 `json:"self_s,omitempty"`
	Ratio float64 `json:"ratio"`
	// Excess is Ratio less the control's (the spinner at the same mode and
	// cpus); nil when no control ran there (--patterns left it out).
	Excess *float64 `json:"excess,omitempty"`
	Pass   bool     `json:"pass"`
	Note   string   `json:"note,omitempty"`
	Failed string   `json:"failed,omitempty"`
	// NotComparable says why the row does not measure what its pattern
	// names (the exec loop's burst was never spent), so it meets no
	// target.
	NotComparable string `json:"not_comparable,omitempty"`
}

// hostRatio is the target: host CPU outside the sandbox at most this
// fraction of the sandbox's quota.
const hostRatio = 0.1

// pattern is a hostile program of the host-CPU table: a command (prog),
// run on the CLI and as a session's exec, or a Python cell (code), which
// only a session runs. A stalled pattern is also streamed to a client
// that stops reading after the first event.
type pattern struct {
	name    string
	prog    func(secs float64) []string
	code    func(secs float64) string
	proxy   bool
	stalled bool
}

var patterns = []pattern{
	{name: "yes flood", prog: yesFlood, stalled: true},
	{name: "1-byte writes", prog: byteWrites},
	{name: "refused egress connections", prog: egressFlood, proxy: true},
	{name: "tiny execs (/bin/true loop in the sandbox)", prog: tinyExecs},
	{name: `os.system("yes") in a Python cell`, code: pyYes, stalled: true},
	{name: "print loop in a Python cell", code: pyPrint, stalled: true},
	{name: controlPattern, prog: spinner},
}

// stalledMode is the mode of rows streamed to a client that stops
// reading; their control is the API's spinner.
const stalledMode = "API stream, client stops reading"

// controlPattern names the pattern whose host cost is Warden's fixed
// cost alone.
const controlPattern = "spinner (control: pure CPU)"

// cpuLevels are the CPU quotas each pattern runs at.
var cpuLevels = []float64{0.1, 1}

// hostCost measures every pattern at every quota on the CLI and through
// the API (sessions of key B), plus client-driven tiny execs, taking the
// median ratio of o.cpuRepeats runs.
func hostCost(o options, t *tenants) []CPURow {
	var rows []CPURow
	for _, p := range patterns {
		if !o.wantsPattern(p.name) {
			continue
		}
		for _, c := range cpuLevels {
			log.Printf("host cpu: %s at %g cpus", p.name, c)
			if p.prog != nil {
				rows = append(rows, medianRun(o.cpuRepeats, func() CPURow { return cliCost(o, p, c) }))
			}
			rows = append(rows, medianRun(o.cpuRepeats, func() CPURow { return apiCost(o, t, p, c) }))
			if p.stalled {
				rows = append(rows, medianRun(o.cpuRepeats, func() CPURow { return apiStalled(o, t, p, c) }))
			}
		}
	}
	for _, l := range clientLoops {
		if !o.wantsPattern(l.name) {
			continue
		}
		for _, c := range cpuLevels {
			log.Printf("host cpu: %s at %g cpus", l.name, c)
			rows = append(rows, medianRun(o.cpuRepeats, func() CPURow { return apiExecLoop(o, t, c, l) }))
		}
	}
	scoreHost(rows)
	return rows
}

// scoreHost sets each measured row's ratio, whether it met the target
// (a row that is not comparable does not), and its excess over the
// control at the same mode and cpus, where the control ran.
func scoreHost(rows []CPURow) {
	control := map[string]float64{}
	for i := range rows {
		r := &rows[i]
		if r.QuotaS > 0 && r.Failed == "" {
			r.Ratio = r.HostS / r.QuotaS
			r.Pass = r.Ratio <= hostRatio && r.NotComparable == ""
			if r.Pattern == controlPattern {
				control[fmt.Sprint(r.Mode, r.CPUs)] = r.Ratio
			}
		}
	}
	for i := range rows {
		r := &rows[i]
		mode := r.Mode
		if mode == stalledMode {
			mode = "API"
		}
		if c, ok := control[fmt.Sprint(mode, r.CPUs)]; ok && r.QuotaS > 0 && r.Failed == "" {
			excess := r.Ratio - c
			r.Excess = &excess
		}
	}
}

// medianRun runs f n times and keeps the run with the median host time
// per quota (the upper one of an even count), so one noisy run does not
// decide the row.
func medianRun(n int, f func() CPURow) CPURow {
	var rows []CPURow
	var hosts []float64
	for i := 0; i < n; i++ {
		r := f()
		if r.Failed != "" {
			return r
		}
		rows = append(rows, r)
		hosts = append(hosts, r.HostS/max(r.QuotaS, 1e-9))
	}
	m := measure.Pct(hosts, 50)
	for _, r := range rows {
		if r.HostS/max(r.QuotaS, 1e-9) == m {
			return r
		}
	}
	return rows[0]
}

// cliCost runs the pattern under `warden run --json` and takes warden
// run's own CPU and its children's from its zombie, and the cgroup's
// from the Result.
func cliCost(o options, p pattern, cpus float64) CPURow {
	row := CPURow{Mode: "CLI", Pattern: p.name, CPUs: cpus}
	d := o.cpuSecs
	args := []string{"run", "--json", "--cpus", fmt.Sprint(cpus), "--timeout", fmt.Sprintf("%gs", d+10)}
	if p.proxy {
		args = append(args, "--net", "proxy")
	}
	cmd := exec.Command(o.warden, append(append(args, "--"), p.prog(d)...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		row.Failed = err.Error()
		return row
	}
	self, children, werr := exitCPU(cmd)
	err := cmd.Wait()
	var r wardenserve.Result
	if werr != nil || err != nil || json.Unmarshal(out.Bytes(), &r) != nil || r.Error != "" {
		row.Failed = fmt.Sprintf("%v %v %s %s", werr, err, r.Error, measure.Tail(errb.Bytes()))
		return row
	}
	row.WallS, row.SandboxS, row.SelfS = r.WallMS/1000, r.CPUTimeMS/1000, self
	row.QuotaS = cpus * row.WallS
	row.HostS = self + max(children-row.SandboxS, 0)
	row.Note = fmt.Sprintf("init outside the cgroup %.3f s", max(children-row.SandboxS, 0))
	return row
}

// apiSession makes key B's session for pattern p at cpus, with its
// interpreter started when p is a cell (the start is not the pattern's
// cost), and returns its id and a func that removes it.
func apiSession(t *tenants, p pattern, cpus float64) (string, func(), error) {
	opts := map[string]any{"limits": map[string]any{"cpus": cpus}}
	if p.proxy {
		opts["network"] = map[string]any{"mode": "proxy"}
	}
	id, err := t.b.Create(opts)
	if err != nil {
		return "", nil, err
	}
	remove := func() { t.b.Remove(id) }
	if p.code != nil {
		if err := t.b.Python(id, "1"); err != nil {
			remove()
			return "", nil, fmt.Errorf("starting the interpreter: %w", err)
		}
	}
	return id, remove, nil
}

// execBody is the exec request that runs pattern p for secs.
func execBody(p pattern, secs float64) map[string]any {
	if p.code != nil {
		return map[string]any{"language": "python", "code": p.code(secs), "timeout_seconds": secs + 10}
	}
	return map[string]any{"command": p.prog(secs), "timeout_seconds": secs + 10}
}

// apiCost runs the pattern as one exec in a session of key B and takes
// the server's host CPU across the exec.
func apiCost(o options, t *tenants, p pattern, cpus float64) CPURow {
	row := CPURow{Mode: "API", Pattern: p.name, CPUs: cpus}
	id, remove, err := apiSession(t, p, cpus)
	if err != nil {
		row.Failed = err.Error()
		return row
	}
	defer remove()
	pid := t.srv.Cmd.Process.Pid
	before := hostCPU(pid)
	var r wardenserve.Result
	err = t.b.Post("/v1/sessions/"+id+"/exec", execBody(p, o.cpuSecs), &r)
	after := hostCPU(pid)
	if err != nil || r.Error != "" {
		row.Failed = fmt.Sprintf("%v %s", err, r.Error)
		return row
	}
	row.WallS, row.SandboxS = r.WallMS/1000, r.CPUTimeMS/1000
	row.QuotaS = cpus * row.WallS
	row.HostS = spent(before, after)
	return row
}

// apiStalled streams the pattern from a session of key B, reads the
// first event and stops reading until the program has ended by itself,
// and takes the server's host CPU meanwhile. No Result arrives, so the
// sandbox's own use is not known.
func apiStalled(o options, t *tenants, p pattern, cpus float64) CPURow {
	row := CPURow{Mode: stalledMode, Pattern: p.name, CPUs: cpus}
	id, remove, err := apiSession(t, p, cpus)
	if err != nil {
		row.Failed = err.Error()
		return row
	}
	defer remove()
	pid := t.srv.Cmd.Process.Pid
	before := hostCPU(pid)
	start := time.Now()
	resp, err := t.b.Open(context.Background(), http.MethodPost, "/v1/sessions/"+id+"/exec/stream", execBody(p, o.cpuSecs))
	if err != nil {
		row.Failed = err.Error()
		return row
	}
	defer resp.Body.Close()
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		row.Failed = fmt.Sprintf("reading the first event: %v", err)
		return row
	}
	time.Sleep(time.Until(start.Add(time.Duration((o.cpuSecs + 0.5) * float64(time.Second)))))
	row.HostS = spent(before, hostCPU(pid))
	row.WallS = time.Since(start).Seconds()
	row.QuotaS = cpus * row.WallS
	row.Note = "first event read, then none until the program's end"
	return row
}

// execLoopPattern and restartLoopPattern name the rows of apiExecLoop.
const (
	execLoopPattern    = "tiny execs (client loop of exec `true`), after the burst"
	restartLoopPattern = "interpreter restarts (client loop of bash `exit 0`), after the burst"
)

// execLoop is one client-driven loop of a tiny exec: its row's name and
// the exec request.
type execLoop struct {
	name string
	body map[string]any
}

// clientLoops are the client loops: a command, and code that ends its
// interpreter, so that each exec starts a new one.
var clientLoops = []execLoop{
	{execLoopPattern, map[string]any{"command": []string{"true"}}},
	{restartLoopPattern, map[string]any{"language": "bash", "code": "exit 0"}},
}

// apiExecLoop is tiny execs driven by the client: l's exec in a session
// of key B, back to back. Exec pacing lets a session's first execs
// through at once (a burst, which each session gets once), so the loop
// first spends it, until an exec reports a wait, and only then measures
// the sustained rate for cpuSecs; the burst's host CPU is noted apart.
func apiExecLoop(o options, t *tenants, cpus float64, l execLoop) CPURow {
	row := CPURow{Mode: "API", Pattern: l.name, CPUs: cpus}
	id, err := t.b.Create(map[string]any{"limits": map[string]any{"cpus": cpus}})
	if err != nil {
		row.Failed = err.Error()
		return row
	}
	defer t.b.Remove(id)
	pid := t.srv.Cmd.Process.Pid
	before := hostCPU(pid)
	burst, spentBurst, err := spendBurst(t, id, l.body)
	if err != nil {
		row.Failed = err.Error()
		return row
	}
	if !spentBurst {
		row.NotComparable = "the burst was never spent (no exec waited for exec pacing), so this is not the rate after it"
	}
	mid := hostCPU(pid)
	start := time.Now()
	n := 0
	for time.Since(start).Seconds() < o.cpuSecs {
		r, err := execOnce(t, id, l.body)
		if err != nil {
			row.Failed = err.Error()
			return row
		}
		row.SandboxS += r.CPUTimeMS / 1000
		n++
	}
	row.WallS = time.Since(start).Seconds()
	row.HostS = spent(mid, hostCPU(pid))
	row.QuotaS = cpus * row.WallS
	row.Note = fmt.Sprintf("%d execs (%.1f/s); before them the burst: %s, %.0f ms of host CPU once",
		n, float64(n)/row.WallS, burst, 1000*spent(before, mid))
	return row
}

// Bounds of spendBurst: no burst of exec pacing is larger.
const (
	maxBurstExecs = 5000
	maxBurstTime  = 60 * time.Second
)

// spendBurst runs the exec body in session id until an exec waited for
// exec pacing (its burst is spent), at most maxBurstExecs times or for
// maxBurstTime, and says how many ran at once and whether one waited.
func spendBurst(t *tenants, id string, body map[string]any) (string, bool, error) {
	start := time.Now()
	for n := 1; n <= maxBurstExecs && time.Since(start) < maxBurstTime; n++ {
		r, err := execOnce(t, id, body)
		if err != nil {
			return "", false, err
		}
		if r.QueuedMS > 0 {
			return fmt.Sprintf("%d execs in %.1f s", n-1, time.Since(start).Seconds()), true, nil
		}
	}
	return fmt.Sprintf("no wait in %v (no exec pacing?)", time.Since(start).Round(time.Second)), false, nil
}

// execOnce runs the exec body in session id of key B; an exec that
// reports an error of Warden's fails.
func execOnce(t *tenants, id string, body map[string]any) (wardenserve.Result, error) {
	var r wardenserve.Result
	if err := t.b.Post("/v1/sessions/"+id+"/exec", body, &r); err != nil {
		return r, err
	}
	if r.Error != "" {
		return r, fmt.Errorf("exec %v: %s", body, r.Error)
	}
	return r, nil
}

// spent is the CPU time between two hostCPU snapshots; a process or
// thread that appeared in between counts from zero.
func spent(before, after map[string]float64) float64 {
	var s float64
	for k, v := range after {
		s += max(v-before[k], 0)
	}
	return s
}
