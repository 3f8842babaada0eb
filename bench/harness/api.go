//go:build linux

package main

import (
	"time"

	"github.com/warden-sandbox/warden/bench/measure"
	"github.com/warden-sandbox/warden/bench/wardenserve"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// server is one warden serve on loopback, used without an API key.
type server struct {
	*wardenserve.Server
	*wardenserve.Client
}

// requestTimeout bounds each request of the harness.
const requestTimeout = 10 * time.Minute

// startServer starts warden serve for the harness: up to 1024 sessions,
// no per-key budget of memory and disk (by default the host's memory,
// which 128 concurrent runs or 100 idle sessions of the default limits
// exceed: 429s), and neither starts nor execs paced (one key's many
// sessions would share one reservoir of exec bursts), as it measures how
// many sessions, runs and execs the host can carry, not what one tenant
// may take.
func startServer(warden, backend string, extra ...string) (*server, error) {
	args := append([]string{"--max-sessions", "1024", "--max-memory-per-key", "0", "--start-rate", "0", "--exec-pace", "0"}, extra...)
	s, err := wardenserve.Start(wardenserve.Options{Warden: warden, Backend: backend, Args: args})
	if err != nil {
		return nil, err
	}
	return &server{Server: s, Client: s.Client("", requestTimeout)}, nil
}

func (s *server) stop() { s.Stop() }

func (s *server) create() (string, error) { return s.Create(nil) }

func (s *server) remove(id string) { s.Remove(id) }

func (s *server) python(id, code string) error { return s.Python(id, code) }

// notebook is a 10-step analysis: data, transforms, statistics, a chart.
var notebook = []string{
	"import numpy as np",
	"rng = np.random.default_rng(7)",
	"x = np.linspace(0, 10, 2000)",
	"y = np.sin(x) + rng.normal(0, 0.1, x.size)",
	"m = y.reshape(40, 50).mean(axis=1)",
	"coef = np.polyfit(x, y, 5)",
	"fit = np.polyval(coef, x)",
	"float(((y - fit) ** 2).mean())",
	"import matplotlib.pyplot as plt\nplt.plot(x, y, ',')\nplt.plot(x, fit)",
	"plt.show()",
}

// sessionWorkloads measures (c), (d) and (f) on backend b.
func sessionWorkloads(o options, b string) []Section {
	c := Section{ID: "c", Title: "exec of 1+1 in a warm Python session through the API (" + b + ")", Baseline: "bare python3 -c 1+1 (cold)"}
	d := Section{ID: "d", Title: "a 10-step notebook in a new Python session (" + b + ")"}
	f := Section{ID: "f", Title: "session create → ready (" + b + ")"}
	bare := Row{Workload: "c", Contender: c.Baseline, Unit: "ms"}
	for i := 0; i < o.rounds; i++ {
		if ms, _, err := timeArgv([]string{python, "-c", "1+1"}); err == nil {
			bare.Samples = append(bare.Samples, ms)
		}
	}
	srv, err := startServer(o.warden, b)
	if err != nil {
		skip := err.Error()
		c.Rows = []Row{bare, {Contender: "warden " + b, Skipped: skip}}
		d.Rows = []Row{{Contender: "warden " + b, Skipped: skip}}
		f.Rows = []Row{{Contender: "warden " + b + " cold", Skipped: skip}}
		return []Section{c, d, f}
	}
	defer srv.stop()
	c.Rows = []Row{bare, warmExecs(srv, o.execs, b)}
	d.Rows = []Row{notebooks(srv, o.notebooks, b)}
	f.Rows = []Row{creates(srv, o.creates, b, "cold", 0)}
	if pooled, err := startServer(o.warden, b, "--pool", "2"); err == nil {
		f.Rows = append(f.Rows, creates(pooled, o.creates, b, "from the warm pool", poolRefill))
		pooled.stop()
	}
	return []Section{c, d, f}
}

// poolRefill is the pause between creates from the pool, so each finds a
// box built ahead as a client pacing its requests would.
const poolRefill = 500 * time.Millisecond

func warmExecs(srv *server, n int, b string) Row {
	row := Row{Workload: "c", Contender: "warden " + b + " session exec", Unit: "ms"}
	id, err := srv.create()
	if err == nil {
		err = srv.python(id, "1")
	}
	if err != nil {
		row.Skipped = err.Error()
		return row
	}
	defer srv.remove(id)
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := srv.python(id, "1+1"); err != nil {
			row.Errors++
			continue
		}
		row.Samples = append(row.Samples, ms(time.Since(start)))
	}
	return row
}

func notebooks(srv *server, n int, b string) Row {
	row := Row{Workload: "d", Contender: "warden " + b, Unit: "ms", Note: "10 cells, interpreter start included"}
	for i := 0; i < n; i++ {
		id, err := srv.create()
		if err != nil {
			row.Errors++
			continue
		}
		start := time.Now()
		for _, cell := range notebook {
			if err = srv.python(id, cell); err != nil {
				break
			}
		}
		if err != nil {
			row.Errors++
			row.Note = err.Error()
		} else {
			row.Samples = append(row.Samples, ms(time.Since(start)))
		}
		srv.remove(id)
	}
	return row
}

func creates(srv *server, n int, b, how string, pause time.Duration) Row {
	row := Row{Workload: "f", Contender: "warden " + b + " " + how, Unit: "ms"}
	time.Sleep(pause)
	for i := 0; i < n; i++ {
		start := time.Now()
		id, err := srv.create()
		if err != nil {
			row.Errors++
			continue
		}
		row.Samples = append(row.Samples, ms(time.Since(start)))
		srv.remove(id)
		time.Sleep(pause)
	}
	return row
}

// idleMemory is (g): what each idle session adds to host memory on each
// backend, as the proportional set size (PSS) of the server and every
// process under it (native inits; gVisor's sandboxes and gofers), and for
// Docker also of the engine (dockerd, containerd, and each container's
// shim with what runs under it), which starts the containers outside the
// server's tree. PSS splits shared pages fairly among their users, and
// unlike MemAvailable it is not moved by the page cache. gVisor and Docker
// stop at maxBoxedSessions: each of their sessions is a runtime's worth.
func idleMemory(o options) Section {
	s := Section{ID: "g", Title: "host memory per idle session (PSS of the server, its sandboxes and, for Docker, the engine)"}
	for _, b := range sandbox.BackendNames() {
		s.Rows = append(s.Rows, backendMemory(o, b)...)
	}
	return s
}

// maxBoxedSessions bounds the idle gVisor and Docker sessions measured,
// and quickBoxedSessions with --quick.
const maxBoxedSessions, quickBoxedSessions = 100, 10

func backendMemory(o options, b string) []Row {
	srv, err := startServer(o.warden, b)
	if err != nil {
		return []Row{{Contender: "warden " + b, Skipped: err.Error()}}
	}
	defer srv.stop()
	limit := maxBoxedSessions
	if o.quick {
		limit = quickBoxedSessions
	}
	var rows []Row
	for _, n := range o.sessionCounts {
		if b != "native" && n > limit {
			continue
		}
		row := Row{Workload: "g", Contender: "warden " + b, Unit: "MiB", X: n}
		before := measure.Footprint(srv.Cmd.Process.Pid, b == "docker")
		var ids []string
		for i := 0; i < n; i++ {
			id, err := srv.create()
			if err != nil {
				row.Errors++
				continue
			}
			ids = append(ids, id)
		}
		time.Sleep(time.Second)
		if len(ids) > 0 {
			row.Samples = []float64{float64(measure.Footprint(srv.Cmd.Process.Pid, b == "docker")-before) / float64(len(ids)) / (1 << 20)}
		}
		for _, id := range ids {
			srv.remove(id)
		}
		rows = append(rows, row)
	}
	return rows
}
