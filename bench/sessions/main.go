// Command sessions measures Warden's sessions through the real HTTP API on
// loopback, each figure next to a baseline taken in the same run:
//
//   - exec of `1+1` in a warm Python session vs starting `python3 -c 1+1`;
//   - session create → ready, cold and from a warm pool, vs a cold
//     one-shot run of /bin/true;
//   - the host memory 200 idle sessions take, without and with a Python
//     interpreter started in each.
//
// It runs the server in-process (the binary is also the sandbox init), so
// run it as root: go run ./bench/sessions
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"time"

	"github.com/warden-sandbox/warden/bench/wardenserve"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// init pins main to the main thread, which the sandbox init needs.
func init() { runtime.LockOSThread() }

func main() {
	if len(os.Args) > 0 && os.Args[0] == nsinit.Arg0 {
		nsinit.Main()
	}
	n := flag.Int("n", 200, "execs measured in the warm session")
	creates := flag.Int("creates", 20, "session creates measured")
	idle := flag.Int("idle", 200, "idle sessions for the memory figure")
	flag.Parse()
	if err := bench(*n, *creates, *idle); err != nil {
		fmt.Fprintln(os.Stderr, "sessions:", err)
		os.Exit(1)
	}
}

// api is one in-process server on loopback.
type api struct{ *wardenserve.InProcess }

func startAPI(pool, maxSessions int) (*api, error) {
	// Starts are not paced: this measures how fast the host creates
	// sessions, not what one tenant may take.
	p, err := wardenserve.StartInProcess(sandbox.Config{Pool: pool, MaxSessions: maxSessions, StartRate: -1})
	if err != nil {
		return nil, err
	}
	return &api{p}, nil
}

// call sends method with body as JSON and decodes the answer into out.
func (a *api) call(method, path string, body, out any) error {
	return a.Do(context.Background(), method, path, body, out)
}

func (a *api) create() (string, error) {
	var s struct{ ID string }
	err := a.call("POST", "/v1/sessions", map[string]any{}, &s)
	return s.ID, err
}

func (a *api) python(id, code string) (spec.Result, error) {
	var r spec.Result
	err := a.call("POST", "/v1/sessions/"+id+"/exec", map[string]any{"language": "python", "code": code}, &r)
	return r, err
}

func bench(n, creates, idle int) error {
	a, err := startAPI(0, idle+8)
	if err != nil {
		return err
	}
	defer a.Close()
	fmt.Println("| measure | median | p90 | baseline median | ratio |")
	fmt.Println("|---|---|---|---|---|")
	if err := benchExec(a, n); err != nil {
		return err
	}
	if err := benchCreate(a, creates); err != nil {
		return err
	}
	if err := benchMemory(a, idle); err != nil {
		return err
	}
	return nil
}

func benchExec(a *api, n int) error {
	id, err := a.create()
	if err != nil {
		return err
	}
	defer func() { _ = a.call("DELETE", "/v1/sessions/"+id, nil, nil) }() // best effort: the bench reports the run, not its cleanup
	if r, err := a.python(id, "1+1"); err != nil || r.Value != "2" {
		return fmt.Errorf("warm-up exec: %+v %w", r, err)
	}
	warm, err := sample(n, func() error {
		r, err := a.python(id, "1+1")
		if err == nil && r.Value != "2" {
			err = fmt.Errorf("1+1 = %q", r.Value)
		}
		return err
	})
	if err != nil {
		return err
	}
	bare, err := sample(30, func() error { return exec.Command("/usr/bin/python3", "-c", "1+1").Run() })
	if err != nil {
		return err
	}
	row("exec `1+1`, warm Python session, HTTP", warm, bare, "python3 -c 1+1")
	return nil
}

func benchCreate(a *api, creates int) error {
	cold, err := sampleCreates(a, creates, 0)
	if err != nil {
		return err
	}
	oneShot, err := sample(creates, func() error {
		var r spec.Result
		return a.call("POST", "/v1/run", map[string]any{"command": []string{"/bin/true"}}, &r)
	})
	if err != nil {
		return err
	}
	row("session create → ready (cold)", cold, oneShot, "one-shot run of /bin/true")
	pooled, err := startAPI(4, 16)
	if err != nil {
		return err
	}
	defer pooled.Close()
	time.Sleep(2 * time.Second)
	warm, err := sampleCreates(pooled, creates, 300*time.Millisecond)
	if err != nil {
		return err
	}
	row("session create → ready (--pool 4)", warm, oneShot, "one-shot run of /bin/true")
	return nil
}

// sampleCreates times session creates alone; each session is deleted
// after its sample, and pause (untimed) lets a pool refill.
func sampleCreates(a *api, n int, pause time.Duration) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		id, err := a.create()
		if err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
		if err := a.call("DELETE", "/v1/sessions/"+id, nil, nil); err != nil {
			return nil, err
		}
		time.Sleep(pause)
	}
	slices.Sort(out)
	return out, nil
}

// benchMemory reports what idle sessions cost the host: MemAvailable's
// drop and the proportional set size of their inits, per session.
func benchMemory(a *api, count int) error {
	runtime.GC()
	before := memAvailable()
	ids := make([]string, 0, count)
	defer func() {
		for _, id := range ids {
			if err := a.call("DELETE", "/v1/sessions/"+id, nil, nil); err != nil {
				fmt.Fprintf(os.Stderr, "sessions bench: deleting %s: %v\n", id, err)
			}
		}
	}()
	for range count {
		id, err := a.create()
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	time.Sleep(time.Second)
	idle := before - memAvailable()
	fmt.Printf("\n%d idle sessions: host MemAvailable dropped %.1f MiB, %.2f MiB each; their inits' PSS %.2f MiB each\n",
		count, mib(idle), mib(idle)/float64(count), mib(childPSS())/float64(count))
	for _, id := range ids {
		if _, err := a.python(id, "1"); err != nil {
			return err
		}
	}
	time.Sleep(time.Second)
	used := before - memAvailable()
	fmt.Printf("%d sessions with a Python interpreter started: %.1f MiB, %.2f MiB each\n", count, mib(used), mib(used)/float64(count))
	return nil
}

func sample(n int, f func() error) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	slices.Sort(out)
	return out, nil
}

func row(name string, got, base []time.Duration, baseName string) {
	g, b := got[len(got)/2], base[len(base)/2]
	fmt.Printf("| %s | %s | %s | %s (%s) | %.2fx |\n", name, ms(g), ms(got[len(got)*9/10]), ms(b), baseName, float64(g)/float64(b))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func mib(b int64) float64 { return float64(b) / (1 << 20) }
