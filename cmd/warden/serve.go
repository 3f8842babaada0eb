//go:build !slim

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/connlimit"
	"github.com/warden-sandbox/warden/internal/gvisor"
	wardenmcp "github.com/warden-sandbox/warden/internal/mcp"
	"github.com/warden-sandbox/warden/internal/metrics"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/server"
	"github.com/warden-sandbox/warden/internal/spec"
)

// serveOptions are warden serve's flags.
type serveOptions struct {
	backend     string
	backendOpts sandbox.BackendOptions
	listen      string
	keyFile     string
	// metricsKeyFile is --metrics-key-file: the operator's keys, which
	// read the whole server's /metrics and nothing else.
	metricsKeyFile string
	maxSessions    int
	maxPaused      int
	maxSnapshots   int
	// snapshotMemory is --snapshot-memory: whether a snapshot keeps the
	// box's memory where the backend can save it.
	snapshotMemory bool
	maxPerKey      int
	// maxBytesPerKey is --max-memory-per-key, or sandbox.ShareOfMemory
	// when not given.
	maxBytesPerKey int64
	pool           int
	verbose        bool
	shutdown       time.Duration
	stateDir       string
	bodyTimeout    time.Duration
	maxConns       int
	sessionFlags
}

func newServeCmd() *cobra.Command {
	o := serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: serveShort,
		Long: `Serve Warden's HTTP API (spec at /openapi.yaml), and its MCP tools over
Streamable HTTP at /mcp. API keys come from
--api-key-file (one per line) or WARDEN_API_KEYS (comma-separated); each key
sees only the sessions it created, and on /metrics only its own figures.
The whole server's metrics (every key's, connections, the process) need an
operator's key, from --metrics-key-file or WARDEN_METRICS_KEYS (read the same
way), which opens /metrics only. Without keys the server accepts anyone, and
shows anyone the whole metrics, so it refuses to listen anywhere but loopback.

No key can starve the others: unless --max-sessions-per-key says otherwise,
each key may hold --max-sessions divided by the number of keys, rounded down
(at least 1), so whatever the other keys hold, every key can still create its
whole share (the share is logged at start). Sandboxes built ahead (--pool)
count for no key. The /mcp endpoint acts for the key's tenant under the same
share. A request may not ask for more than the operator's ceilings (--max-*,
defaults sized for the memory and CPUs warden may use, its cgroup's limits
included: memory and disk a quarter of that memory, CPUs all of them); above
one it is answered 400 naming the limit and the flag. What a request leaves
out takes the default limits, lowered to the ceilings (and, on the native
backend, to warden's hard rlimits), each lowering logged at start. Nor can a
key fill the memory: the memory plus disk of all its sandboxes, dead sessions'
kept files included, is bounded by --max-memory-per-key (429 past it), nor
make the host start sandboxes for it without end: each key may start
--start-rate sessions and runs a second after a burst (429 with Retry-After
past it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("max-memory-per-key") {
				o.maxBytesPerKey = sandbox.ShareOfMemory
			}
			return serve(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	addBackendFlags(f, &o.backend, "isolation backend of every sandbox", &o.backendOpts)
	addAgentTransportFlag(f, &o.backendOpts)
	addKubeFlags(f, &o.backendOpts)
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&o.keyFile, "api-key-file", "", "file of API keys, one per line")
	f.StringVar(&o.metricsKeyFile, "metrics-key-file", "", "file of the operator's keys, one per line, which read the whole server's /metrics and nothing else (a tenant's key sees its own figures)")
	f.IntVar(&o.maxSessions, "max-sessions", 64, "sessions and one-shot runs alive at once; more are answered 429")
	f.IntVar(&o.maxPaused, "max-paused", 0, "sessions paused at once, beside --max-sessions (0: as many as --max-sessions); a paused session keeps its memory but holds no --max-sessions slot")
	f.IntVar(&o.maxSnapshots, "max-snapshots", 0, "sessions snapshotted to disk at once (0: four times --max-sessions); a snapshotted session holds no --max-sessions slot, only its files (and, see --snapshot-memory, its memory's image) under --state-dir")
	f.BoolVar(&o.snapshotMemory, "snapshot-memory", true, "where the backend can (gVisor over the stream), a snapshot or auto-snapshot keeps the box's memory under --state-dir, so a resume or fork keeps its processes; false keeps files only (see docs/sessions.md)")
	f.StringVar((*string)(&o.backendOpts.SnapshotCompression), "snapshot-compression", string(gvisor.CompressionNone), "how a --backend "+sandbox.MemoryBackends()+
		" snapshot or fork with memory (see --snapshot-memory) writes the box's memory: "+gvisor.CompressionChoices()+
		"; none costs as many bytes on disk and of --max-memory-per-key as the memory the box holds that is not zero, and resumes while its pages load; fast flate-compresses it on the box's own CPUs (far fewer bytes where it compresses; a box too large for its CPUs to compress in time is written uncompressed) and resumes once all is read; snapshots of either kind resume whatever it says now (see docs/sessions.md)")
	f.IntVar(&o.maxPerKey, "max-sessions-per-key", 0, "sessions and runs one API key may hold (0: --max-sessions divided by the number of keys, rounded down)")
	f.Var(sizeFlag{&o.maxBytesPerKey}, "max-memory-per-key", "memory plus disk the sandboxes of one API key may hold together, dead sessions' kept files included (default: the memory available to warden divided by the number of keys; 0: no budget)")
	f.IntVar(&o.pool, "pool", 0, "sandboxes kept built ahead, so creating a default session is instant")
	addSessionFlags(f, &o.sessionFlags)
	f.BoolVar(&o.verbose, "verbose", false, "log every request")
	f.DurationVar(&o.shutdown, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long running requests may finish before every session is killed")
	f.DurationVar(&o.bodyTimeout, "body-timeout", server.DefaultBodyReadTimeout, "longest pause in a request body (which must also average 64 KiB/s); past it the answer is 408")
	f.IntVar(&o.maxConns, "max-connections", 0, "connections held at once, at most (0: as many as the descriptor limit leaves beside the sandboxes' reserve)")
	f.StringVar(&o.stateDir, "state-dir", defaultStateDir(), `where session records and workspaces are kept, so they outlive a crash of the server ("none": keep nothing)`)
	return cmd
}

// maxSandboxes bounds --max-sessions and --pool far above what any host
// holds (each sandbox needs hundreds of descriptors and megabytes), so
// their sum and the descriptors reserved for them cannot overflow.
const maxSandboxes = 1 << 20

func serve(ctx context.Context, o serveOptions) error {
	if err := checkExecutor(o.backend, o.backendOpts); err != nil {
		return err
	}
	if err := checkSnapshotCompression(o.backend, o.backendOpts, o.snapshotMemory, o.stateDir); err != nil {
		return err
	}
	switch {
	case o.bodyTimeout <= 0:
		return fmt.Errorf("--body-timeout %s: must be positive, such as 30s", o.bodyTimeout)
	case o.maxConns < 0:
		return fmt.Errorf("--max-connections %d: must be 0 (no cap but the descriptor limit's) or positive", o.maxConns)
	case o.maxSessions > maxSandboxes:
		return fmt.Errorf("--max-sessions %d: must be at most %d, such as 64", o.maxSessions, maxSandboxes)
	case o.pool > maxSandboxes:
		return fmt.Errorf("--pool %d: must be at most %d, such as 8", o.pool, maxSandboxes)
	case o.maxPaused < 0 || o.maxPaused > maxSandboxes:
		return fmt.Errorf("--max-paused %d: must be 0 (as many as --max-sessions) up to %d, such as 64", o.maxPaused, maxSandboxes)
	case o.maxSnapshots < 0 || o.maxSnapshots > maxSandboxes:
		return fmt.Errorf("--max-snapshots %d: must be 0 (four times --max-sessions) up to %d, such as 256", o.maxSnapshots, maxSandboxes)
	}
	keys, err := loadKeys(o.keyFile, "WARDEN_API_KEYS", "API keys")
	if err != nil {
		return err
	}
	if len(keys) == 0 && !isLoopback(o.listen) {
		return fmt.Errorf("--listen %s without API keys would serve sandboxes to anyone: set WARDEN_API_KEYS or --api-key-file, or listen on 127.0.0.1", o.listen)
	}
	metricsKeys, err := loadKeys(o.metricsKeyFile, "WARDEN_METRICS_KEYS", "metrics keys")
	if err != nil {
		return err
	}
	if err := checkKubeKeys(o.backend, keys); err != nil {
		return err
	}
	if err := checkKeys(keys, metricsKeys); err != nil {
		return err
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	// Packages that log without a logger of their own (the backends'
	// cleanup warnings, the E2B services' internal errors) log here too.
	slog.SetDefault(log)
	var srv *server.Server
	cfg := sandbox.Config{
		MaxSessions: o.maxSessions, MaxPaused: o.maxPaused, MaxSnapshots: o.maxSnapshots, MaxPerOwner: o.maxPerKey, Owners: server.Tenants(keys), Pool: o.pool,
		DefaultTTL: o.ttl, DefaultIdle: o.idle, MaxTTL: o.caps.ttl, MaxIdle: o.caps.idle, Ceilings: o.ceilings,
		MaxBytesPerOwner: o.maxBytesPerKey, FilesOnlySnapshots: !o.snapshotMemory,
		OnPoolError: func(err error) { log.Error("pool", "err", err) },
		OnReap: func(owner, reason string) {
			if srv != nil {
				srv.ObserveReap(owner, reason)
			}
		},
	}
	if err := o.paces.apply(&cfg); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	backend, notes, err := serverBackend(o.backend, o.backendOpts, cfg, log)
	if err != nil {
		return err
	}
	// A state directory that cannot be used fails the start in one line,
	// before anything is logged.
	store, err := openState(remoteStateDir(backend, o.stateDir, log))
	if err != nil {
		return err
	}
	logFit(log, notes)
	sweepCgroups(log)
	if store != nil {
		defer store.Close()
	}
	if store != nil {
		cfg.Store = store
		cfg.OnStoreError = func(err error) { log.Error("state directory", "err", err) }
		if cfg.Snapshots, err = openSnapshots(store); err != nil {
			return err
		}
	}
	if cfg.Templates, err = serveTemplates(o.stateDir, log); err != nil {
		return err
	}
	cfg.Logger = log
	mgr := sandbox.NewManager(backend, cfg)
	defer mgr.Close()
	reportState(log, store, mgr)
	reportShare(log, cfg.Owners, mgr.MaxSessions(), mgr.PerOwner())
	reportBudget(log, mgr.BytesPerOwner())
	// MCP clients get the API's own defaults and, as the API lets a key
	// ask for an egress allowlist, so may they; a key's tenant owns them.
	mcpHandler := wardenmcp.HTTPHandler(mgr, wardenmcp.Options{
		AllowNetwork: true, Version: version, Logger: log, Templates: cfg.Templates,
	}, server.OwnerFrom)
	registry := metrics.NewRegistry()
	scfg := server.Config{
		Keys: keys, MetricsKeys: metricsKeys, AllowAnonymous: len(keys) == 0, Logger: log, Mount: map[string]http.Handler{"/mcp": mcpHandler},
		BodyReadTimeout: o.bodyTimeout, Registry: registry, Templates: cfg.Templates, Replicas: server.ReplicasOf(backend, mgr),
	}
	if scfg.Front, err = e2bFront(mgr, scfg, log, &srv); err != nil {
		return err
	}
	srv, err = server.New(mgr, scfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.listen, err)
	}
	auth := fmt.Sprintf("%d API keys, %d metrics keys", len(keys), len(metricsKeys))
	if len(keys) == 0 {
		auth = "no API keys: anyone on this machine can use it (loopback only)"
	}
	fmt.Fprintf(os.Stderr, "warden: serving on http://%s (%s)\n", ln.Addr(), auth)
	// A paused session holds its descriptors as a running one does.
	reserve := connlimit.Reserve{Sandboxes: mgr.MaxSessions() + mgr.MaxPaused() + o.pool, PerSandbox: descriptorsReserved(o.backend, o.backendOpts.AgentTransport)}
	limited := connlimit.ForSandboxes(ln, connlimit.Options{Reserve: reserve, Keyless: len(keys) == 0, Pool: o.pool, MaxConns: o.maxConns, Tenants: server.ConnectionOwners(keys, metricsKeys), Log: log})
	if err := registry.Register(limited.Collectors()...); err != nil {
		return fmt.Errorf("registering the connection metrics: %w", err)
	}
	err = run(ctx, limited, srv.Handler(), o.shutdown)
	// Close always returns nil: what the sessions' cleanup fails at is
	// logged, and what it leaves is reported just below.
	_ = mgr.Close()
	if left := leftBehind(); len(left) > 0 {
		return errors.Join(err, fmt.Errorf("shutting down left %d sandbox cgroups behind (%s); the next warden run or serve removes them", len(left), strings.Join(left, ", ")))
	}
	if left := stateLeft(store); left != "" {
		return errors.Join(err, fmt.Errorf("shutting down left %s in %s; the next warden serve there reports them as dead or removes them", left, store.Path()))
	}
	if err == nil {
		fmt.Fprintln(os.Stderr, "warden: stopped; every session ended and was cleaned up")
	}
	return err
}

// reportShare logs how many sessions and runs each key may hold, and
// warns when the shares add up to more than there are slots, so a key
// may find them all taken by the others.
func reportShare(log *slog.Logger, keys, maxSessions, share int) {
	log.Info("sessions and runs per API key", "share", share, "keys", keys, "max_sessions", maxSessions)
	if keys > 1 && keys*share > maxSessions {
		log.Warn("the keys' shares add up to more than --max-sessions: a key may find every slot taken by the others; raise --max-sessions or lower --max-sessions-per-key",
			"keys", keys, "share", share, "max_sessions", maxSessions)
	}
}

// reportBudget logs the memory and disk each key's sandboxes may hold.
func reportBudget(log *slog.Logger, budget int64) {
	if budget == 0 {
		log.Info("memory and disk per API key: no budget (--max-memory-per-key 0)")
		return
	}
	log.Info("memory and disk per API key", "budget", spec.FormatSize(budget))
}

// leftBehind lists this process's sandbox cgroups that still exist.
func leftBehind() []string {
	var left []string
	for _, p := range cgroup.Parents() {
		found, _ := filepath.Glob(filepath.Join(p, strconv.Itoa(os.Getpid())+"-*"))
		left = append(left, found...)
	}
	return left
}

// run serves until SIGINT or SIGTERM, then stops taking requests and lets
// the ones in flight (running execs) finish for up to grace; the caller
// then ends every session. ln's cap on connections keeps descriptors for
// the sandboxes.
func run(ctx context.Context, ln *connlimit.Listener, h http.Handler, grace time.Duration) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- ln.Serve(hs) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintf(os.Stderr, "warden: stopping: no new requests; running ones have %s to finish\n", grace)
	shutdown, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := hs.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// checkKeys checks the keys as the server will, before anything starts,
// and says in a refusal where each kind of key comes from.
func checkKeys(keys, metricsKeys []string) error {
	err := server.Config{Keys: keys, MetricsKeys: metricsKeys, AllowAnonymous: len(keys) == 0}.CheckKeys()
	if err != nil {
		return fmt.Errorf("%w (API keys come from --api-key-file or WARDEN_API_KEYS, metrics keys from --metrics-key-file or WARDEN_METRICS_KEYS)", err)
	}
	return nil
}

// loadKeys reads keys (what names them in errors) from file (one per
// line, # comments) and from the environment variable env
// (comma-separated): the one way every kind of key is given.
func loadKeys(file, env, what string) ([]string, error) {
	var keys []string
	if env := os.Getenv(env); env != "" {
		for k := range strings.SplitSeq(env, ",") {
			if k = strings.TrimSpace(k); k != "" {
				keys = append(keys, k)
			}
		}
	}
	if file == "" {
		return keys, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			keys = append(keys, line)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s file %s has no keys", what, file)
	}
	return keys, nil
}

// isLoopback says whether addr (host:port) listens on loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
