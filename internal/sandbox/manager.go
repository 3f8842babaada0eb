package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/snapshot"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// Config tunes a Manager; zero fields take the defaults in parentheses.
type Config struct {
	// MaxSessions caps sessions and one-shot runs alive at once (64);
	// past it Create and Run fail at once with ErrTooMany, never queue.
	MaxSessions int
	// MaxPaused caps sessions paused at once (MaxSessions); a paused
	// session holds one of these instead of a MaxSessions slot, and each
	// owner may hold Share(MaxPaused, Owners) of them.
	MaxPaused int
	// MaxPerOwner caps what one owner (one API key) may hold of
	// MaxSessions, so one tenant cannot take every slot; zero means
	// Share(MaxSessions, Owners). Pooled boxes count for nobody.
	MaxPerOwner int
	// Owners is how many owners (API keys) may use the Manager, for the
	// default share; zero or one leaves the one owner every slot.
	Owners int
	// DefaultTTL (1h) is a session's life when it asks for none; MaxTTL
	// (MaxSessionLife, the API's own bound) is the longest it may ask for.
	DefaultTTL, MaxTTL time.Duration
	// DefaultIdle (10m) ends a session no one used for that long; MaxIdle
	// (MaxSessionLife) is the longest idle timeout it may ask for.
	DefaultIdle, MaxIdle time.Duration
	// Ceilings bound the limits any sandbox, session or exec may ask for
	// (none when zero; see DefaultCeilings). Every front end's request
	// passes through the Manager, so this is the one place they are
	// checked.
	Ceilings spec.Ceilings
	// DefaultLimits (spec.DefaultLimits) are what a request asking for no
	// limits gets and what the pool builds, lowered to the Ceilings (see
	// Fit); front ends read the result from Manager.DefaultLimits.
	DefaultLimits spec.Limits
	// MaxBytesPerOwner caps the memory plus disk of every sandbox one
	// owner holds at once, dead sessions' kept disk included (0: none;
	// ShareOfMemory: the memory available divided by Owners), so one key
	// cannot fill the host's memory within the per-sandbox ceilings.
	MaxBytesPerOwner int64
	// ReapEvery is how often expiry is checked (1s).
	ReapEvery time.Duration
	// Pool keeps this many sandboxes built ahead with the default
	// limits and no network, so a Create asking for those is served at
	// once.
	Pool int
	// OnPoolError is told why the pool could not build a sandbox, at most
	// once a minute while it keeps failing; it must not block.
	OnPoolError func(error)
	// Files bounds host-side file access.
	Files workspace.Limits
	// OnReap is told each session the reaper ended, once: its owner, and
	// why ("ttl", "idle", "died"). A session whose sandbox died is told
	// once, when it becomes dead (kept files or not); its later removal
	// from the dead is not told again. It must not block.
	OnReap func(owner, reason string)
	// Store, when set, keeps a record of every session and, where the
	// backend allows, its workspace outside the sandbox, so both outlive
	// a crash of this process (see Persistence).
	Store Store
	// OnStoreError is told of a Store failure nobody waits on: removing a
	// deleted session's record, or updating one. The session itself is
	// served (or gone) as asked; only what a crash would recover differs.
	// It must not block.
	OnStoreError func(error)
	// ExecPace is the fraction of a session's CPU quota the host may
	// spend on starting its execs, which no cgroup charges (see
	// DefaultExecPace, used when zero); negative turns pacing off.
	ExecPace float64
	// StartRate is how many sessions and one-shot runs each owner may
	// start a second after a burst, as a start costs the host CPU that
	// no cgroup charges (see DefaultStartRate, used when zero); negative
	// turns pacing off.
	StartRate float64
	// Logger receives the warnings of cleanups nobody waits on (a box
	// that would not close, a spawned process that would not die at its
	// session's end, a workspace left behind), with the session's
	// id (default: slog.Default(), so an embedder's own logger sees them
	// rather than nobody).
	Logger *slog.Logger

	// Snapshots, when set, is where Snapshot writes sessions' files
	// (<state-dir>/snapshots); without it Snapshot and Fork answer
	// ErrUnsupported. MaxSnapshots caps snapshotted sessions
	// (4 × MaxSessions), each owner's share as for MaxPaused.
	Snapshots    *snapshot.Store
	MaxSnapshots int
	// FilesOnlySnapshots keeps every snapshot to the session's files,
	// even on a MemoryBackend and when the snapshot asks for memory (an
	// auto-snapshot, the API's default): no image of the box's memory,
	// which holds whatever secrets its processes hold, is written under
	// the state directory, and a fork copies files only. A memory
	// snapshot kept before (by a server run without it) still resumes
	// whole. The zero value keeps memory where the backend can.
	FilesOnlySnapshots bool

	// Templates, when set, is where sessions find the templates they
	// name (SessionOptions.Template); without it only the host's root is
	// served.
	Templates Templates

	// hardBounds names, by limit, the backend bound Fit lowered a ceiling
	// to, so a refusal names it rather than the flag.
	hardBounds map[string]string
}

func (c Config) withDefaults() Config {
	if c.MaxSessions <= 0 {
		c.MaxSessions = 64
	}
	if c.MaxPaused <= 0 {
		c.MaxPaused = c.MaxSessions
	}
	if c.MaxSnapshots <= 0 {
		c.MaxSnapshots = 4 * c.MaxSessions
	}
	if c.MaxPerOwner == 0 {
		c.MaxPerOwner = Share(c.MaxSessions, c.Owners)
	}
	if c.DefaultTTL <= 0 {
		c.DefaultTTL = time.Hour
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = MaxSessionLife
	}
	if c.DefaultIdle <= 0 {
		c.DefaultIdle = 10 * time.Minute
	}
	if c.MaxIdle == 0 {
		c.MaxIdle = MaxSessionLife
	}
	if c.ReapEvery <= 0 {
		c.ReapEvery = time.Second
	}
	if c.DefaultLimits == (spec.Limits{}) {
		c.DefaultLimits = spec.DefaultLimits
	}
	if c.OnPoolError == nil {
		c.OnPoolError = func(error) {}
	}
	if c.OnReap == nil {
		c.OnReap = func(string, string) {}
	}
	if c.OnStoreError == nil {
		c.OnStoreError = func(error) {}
	}
	if c.ExecPace == 0 {
		c.ExecPace = DefaultExecPace
	}
	if c.StartRate == 0 {
		c.StartRate = DefaultStartRate
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Manager owns every session of one Warden process: it creates them,
// routes execs and file access to them, ends them on request or expiry,
// and keeps a caller from seeing another's sessions.
type Manager struct {
	backend Backend
	cfg     Config
	// copies bounds the snapshot copies (captures and restores) under
	// way at once, server-wide (see copySlot).
	copies chan struct{}

	mu       sync.Mutex
	sessions map[string]*session
	// active counts sessions and one-shot runs holding a slot, in all and
	// by owner.
	active  int
	byOwner map[string]int
	// paused counts paused sessions (see MaxPaused), snapshots
	// snapshotted ones (see MaxSnapshots).
	paused, snapshots slotCount
	// bytesByOwner is what each owner's sandboxes count against
	// MaxBytesPerOwner, and held what each session counts of it, by id:
	// its memory and disk while alive, its kept disk once dead.
	bytesByOwner map[string]int64
	held         map[string]int64
	closed       bool
	// pins counts the forks copying from each snapshot, by name, and
	// unpinnedDrop names pinned ones dropped meanwhile (see pinSnapshot).
	pins         map[string]int
	unpinnedDrop map[string]bool
	// adopting holds, by id, the attach of a RemoteBackend's session
	// under way, closed when it is done: concurrent requests for one
	// session wait for it rather than dial the Pod a second time (which
	// would find it taken by the first dial).
	adopting map[string]*adoption
	// finds bounds the Finds of a RemoteBackend under way at once, lists
	// its Lists (apart, so that listings cannot starve lookups), and
	// missing holds when each owner's id Find last answered ErrNotFound
	// (see remoteMissing): one tenant's bogus ids cost the shared store
	// little. findsBy and listsBy count each owner's slots of finds and
	// lists taken, against its share (see shares), and listPace paces
	// each owner's listings (listRate).
	finds, lists     chan struct{}
	findsBy, listsBy *shares
	listPace         *ownerBuckets
	missing          map[string]time.Time

	// poolSpec is what the pool builds: the default limits, no network.
	poolSpec spec.Spec

	pool *pool
	// starts paces each owner's Creates and Runs (nil: not paced).
	starts *startPacer
	// bursts holds each owner's exec bursts for its new sessions.
	bursts *execBursts
	stop   chan struct{}
	wg     sync.WaitGroup
	// discards counts pooled run boxes being thrown away after their
	// answer was given (their slots already free); Close waits for them.
	discards sync.WaitGroup
	// runs counts one-shot runs in flight; Close cancels them through
	// endRuns and waits, so none outlives it with a sandbox half removed.
	runs    sync.WaitGroup
	runsEnd context.Context
	endRuns context.CancelFunc

	// persist says sessions get workspaces from the Store.
	persist  bool
	recovery Recovery
}

// NewManager starts a Manager and its reaper (and pool, if configured).
// With a Store it first brings back the sessions a crashed server left
// there, as dead ones (see Recovered).
//
// cfg is applied as Fit makes it hold on b; callers check Fit's error
// first, as a Manager made anyway would refuse what Fit names.
func NewManager(b Backend, cfg Config) *Manager {
	cfg, _, _ = cfg.Fit(b)
	m := &Manager{
		backend: b, cfg: cfg, sessions: map[string]*session{}, byOwner: map[string]int{},
		paused: newSlotCount("paused", "max-paused"), snapshots: newSlotCount("snapshotted", "max-snapshots"),
		bytesByOwner: map[string]int64{}, held: map[string]int64{}, stop: make(chan struct{}), copies: make(chan struct{}, maxCopies),
		pins: map[string]int{}, unpinnedDrop: map[string]bool{}, adopting: map[string]*adoption{},
		finds: make(chan struct{}, remoteFinds), lists: make(chan struct{}, remoteLists), missing: map[string]time.Time{},
		findsBy: newShares(remoteFinds, remoteFindsPerKey), listsBy: newShares(remoteLists, remoteListsPerKey), listPace: newListPacer(),
		poolSpec: spec.Spec{Limits: cfg.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}},
		starts:   newStartPacer(cfg.StartRate), bursts: newExecBursts(cfg.ExecPace),
	}
	m.runsEnd, m.endRuns = context.WithCancel(context.Background())
	m.persist = persistsWorkspaces(b, cfg.Store)
	if cfg.Store != nil {
		m.recovery = m.recoverSessions()
	}
	m.pool = newPool(m.startBox, m.discardBox, poolWarm(b), m.poolSpec, cfg.Pool, cfg.OnPoolError)
	m.wg.Add(1)
	go m.reapLoop()
	if rb, ok := b.(RemoteBackend); ok {
		m.wg.Add(1)
		go m.remoteReapLoop(rb, remoteReapEvery)
	}
	return m
}

// PerOwner is how many sessions and runs one owner may hold at once.
func (m *Manager) PerOwner() int { return m.cfg.MaxPerOwner }

// MaxSessions is how many sessions and runs may be alive at once.
func (m *Manager) MaxSessions() int { return m.cfg.MaxSessions }

// BytesPerOwner is the memory and disk one owner's sandboxes may hold
// together (0: no budget).
func (m *Manager) BytesPerOwner() int64 { return m.cfg.MaxBytesPerOwner }

// DefaultLimits are what a request asking for no limits gets: the one
// value every front end (the API, /mcp, the pool) starts from, already
// within the ceilings.
func (m *Manager) DefaultLimits() spec.Limits { return m.cfg.DefaultLimits }

// Ceilings bound what any request may ask for.
func (m *Manager) Ceilings() spec.Ceilings { return m.cfg.Ceilings }

// LifeCaps are the longest ttl and idle timeout a session may ask for.
func (m *Manager) LifeCaps() (ttl, idle time.Duration) { return m.cfg.MaxTTL, m.cfg.MaxIdle }

// Recovered says what NewManager found in the Store.
func (m *Manager) Recovered() Recovery { return m.recovery }

// PersistsWorkspaces says whether session workspaces outlive a crash of
// this process.
func (m *Manager) PersistsWorkspaces() bool { return m.persist }

// acquire takes a slot, bytes of the memory budget and one of the
// start pacer's tokens for owner's session or run, or fails with
// ErrTooMany; under m.mu, so concurrent requests cannot together pass a
// limit. The token is taken last, once the slot and budget checks have
// passed, so a start refused for them costs none of the owner's starts.
// A run is also counted in m.runs, which Close waits for.
func (m *Manager) acquire(owner string, run bool, bytes int64) error {
	return m.acquireSlot(owner, run, true, bytes)
}

// acquireSlot is acquire, taking a start token only when paced says so:
// a remote session another server started (adopt) starts nothing.
func (m *Manager) acquireSlot(owner string, run, paced bool, bytes int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("%w: the server is shutting down", ErrClosed)
	}
	if m.active >= m.cfg.MaxSessions {
		return fmt.Errorf("%w: the server is at its limit of sessions and runs (set by --max-sessions; this key holds %d); delete a session or retry later",
			ErrTooMany, m.byOwner[owner])
	}
	if n := m.byOwner[owner]; m.cfg.MaxPerOwner > 0 && n >= m.cfg.MaxPerOwner {
		return fmt.Errorf("%w: this key holds %d sessions and runs, its limit is %d (set by --max-sessions-per-key); delete a session or retry later",
			ErrTooMany, n, m.cfg.MaxPerOwner)
	}
	if n, b := m.bytesByOwner[owner], m.cfg.MaxBytesPerOwner; b > 0 && n+bytes > b {
		return fmt.Errorf("%w: this key's sessions and runs hold %s of memory and disk, dead sessions' files included, and this one asks for %s more; the key's budget is %s (set by --max-memory-per-key): delete a session or ask for less",
			ErrTooMany, spec.FormatSize(n), spec.FormatSize(bytes), spec.FormatSize(b))
	}
	if paced {
		if err := m.starts.take(owner); err != nil {
			return err
		}
	}
	m.active++
	m.byOwner[owner]++
	m.bytesByOwner[owner] += bytes
	if run {
		m.runs.Add(1)
	}
	return nil
}

// release gives back a slot and bytes of owner's budget.
func (m *Manager) release(owner string, bytes int64) {
	m.mu.Lock()
	m.active--
	if m.byOwner[owner]--; m.byOwner[owner] <= 0 {
		delete(m.byOwner, owner)
	}
	m.unchargeLocked(owner, bytes)
	m.mu.Unlock()
}

// chargeBytes counts bytes against owner's budget that no session holds
// (a fork's temporary snapshot); unchargeBytes gives them back.
func (m *Manager) chargeBytes(owner string, bytes int64) {
	if m.cfg.MaxBytesPerOwner == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bytesByOwner[owner] += bytes
}

func (m *Manager) unchargeBytes(owner string, bytes int64) {
	if m.cfg.MaxBytesPerOwner == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unchargeLocked(owner, bytes)
}

func (m *Manager) unchargeLocked(owner string, bytes int64) {
	if m.bytesByOwner[owner] -= bytes; m.bytesByOwner[owner] <= 0 {
		delete(m.bytesByOwner, owner)
	}
}

// detachHeld takes what session s holds of its owner's budget off s,
// still counted against the owner, and returns it for its caller to
// hold (see heldRun).
func (m *Manager) detachHeld(s *session) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	bytes := m.held[s.id]
	delete(m.held, s.id)
	return bytes
}

// keep lowers what session s counts against its owner's budget to
// bytes (its kept disk once dead, nothing once gone).
func (m *Manager) keep(s *session, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keepLocked(s, bytes)
}

func (m *Manager) keepLocked(s *session, bytes int64) {
	if held, ok := m.held[s.id]; ok && bytes < held {
		m.unchargeLocked(s.owner, held-bytes)
		m.held[s.id] = bytes
	}
	if bytes == 0 {
		delete(m.held, s.id)
	}
}

// settle makes what session s counts against its owner's budget bytes,
// raising it too: a memory snapshot can hold more than the box did (its
// image and its files both), which the budget counts at once rather
// than after a restart. One that ended meanwhile is left as its end
// left it.
func (m *Manager) settle(s *session, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	held, ok := m.held[s.id]
	if !ok || m.sessions[s.id] != s {
		return
	}
	if bytes > held && m.cfg.MaxBytesPerOwner != 0 {
		m.bytesByOwner[s.owner] += bytes - held
		m.held[s.id] = bytes
		return
	}
	m.keepLocked(s, bytes)
}

// Create builds a session for owner and returns it ready.
func (m *Manager) Create(ctx context.Context, owner string, o SessionOptions) (Info, error) {
	ses, err := m.create(ctx, owner, o, nil, nil)
	if err != nil {
		return Info{}, err
	}
	return ses.info(), nil
}

// create builds a session for owner, its box from start (a fork's
// restore of a saved box), or, if start is nil, from the warm pool or
// a fresh start, and returns it ready. setup, if not nil, gives the new
// session what start made for it (a fork's adopted interpreters) before
// anyone can find it.
func (m *Manager) create(ctx context.Context, owner string, o SessionOptions, start startFunc, setup func(*session)) (*session, error) {
	s, err := m.newSessionSpec(o)
	if err != nil {
		return nil, err
	}
	rb, remote := m.backend.(RemoteBackend)
	lease := func() {}
	if !remote {
		if s.Root, lease, err = m.resolveTemplate(o.Template, owner); err != nil {
			return nil, err
		}
	}
	bytes := m.charge(s.Limits)
	if err := m.acquire(owner, false, bytes); err != nil {
		lease()
		return nil, err
	}
	id, idle := newID(), m.idle(o.IdleTimeout)
	var box Box
	var ws string
	refill := func() {}
	if remote {
		// The store refuses an idle timeout past the TTL, which could
		// never end the session first.
		ttl := m.ttl(o.TTL)
		idle = min(idle, ttl)
		box, err = rb.Claim(ctx, RemoteSession{ID: id, Owner: owner, Template: o.Template, TTL: ttl, Idle: idle, Limits: s.Limits, MaxPerOwner: m.cfg.MaxPerOwner}, s)
	} else if start != nil {
		box, ws, err = start(ctx, s)
	} else if box, ws, refill = m.pool.take(s); box == nil {
		box, ws, err = m.startBox(ctx, s)
	}
	if err != nil {
		m.release(owner, bytes)
		lease()
		return nil, err
	}
	now := time.Now()
	pace := newExecPacer(s.Limits.CPUs, m.cfg.ExecPace)
	pace.startWith(m.bursts.take(owner, pace.burst()))
	ses := &session{
		id: id, owner: owner, box: box, spec: s, state: StateReady, files: m.cfg.Files, store: m.cfg.Store,
		created: now, lastUsed: now, expires: now.Add(m.ttl(o.TTL)), idle: idle,
		ws: ws, slot: true, gone: make(chan struct{}), pace: pace, lease: lease, autoPause: o.AutoPause,
		autoSnapshot: o.AutoSnapshot, firstExecEnded: refill,
	}
	if setup != nil {
		setup(ses)
	}
	if err := m.save(ses); err != nil {
		refill()
		if cerr := closeHeld(ses.interps, nil); cerr != nil {
			m.cfg.Logger.Warn("closing the interpreters of an unused sandbox", "session", ses.id, "err", cerr)
		}
		m.discardBox(box, ws)
		m.releaseRemote(ses) // nobody learns its id: its record would hold a Pod until idle
		m.release(owner, bytes)
		lease()
		return nil, err
	}
	m.mu.Lock()
	closed := m.closed
	if !closed {
		m.sessions[ses.id] = ses
		m.wg.Add(1)
		go m.watchBox(ses)
	}
	m.held[ses.id] = bytes // end, even the one below, gives it back
	m.mu.Unlock()
	if closed {
		// Close has already ended the sessions it knew of; nobody learns
		// this one's id, so a remote one's record is released too.
		m.endReleasing(ses)
		return nil, fmt.Errorf("%w: the server is shutting down", ErrClosed)
	}
	return ses, nil
}

func (m *Manager) newSessionSpec(o SessionOptions) (spec.Spec, error) {
	s := spec.Spec{Env: o.Env, Limits: o.Limits, Network: o.Network}
	if s.Network.Mode == "" {
		s.Network.Mode = spec.NetNone
	}
	if o.TTL < 0 || o.TTL > m.cfg.MaxTTL {
		return s, fmt.Errorf("%w: ttl %v is out of range: use up to %v, this server's ceiling (set by --max-ttl)", spec.ErrInvalid, o.TTL, m.cfg.MaxTTL)
	}
	if o.IdleTimeout < 0 || o.IdleTimeout > m.cfg.MaxIdle {
		return s, fmt.Errorf("%w: idle timeout %v is out of range: use up to %v, this server's ceiling (set by --max-idle-timeout)", spec.ErrInvalid, o.IdleTimeout, m.cfg.MaxIdle)
	}
	if err := s.ValidateSandbox(); err != nil {
		return s, err
	}
	if err := m.checkCeilings(s.Limits); err != nil {
		return s, err
	}
	return s, m.checkBudget(s.Limits)
}

func (m *Manager) ttl(d time.Duration) time.Duration {
	if d == 0 {
		return m.cfg.DefaultTTL
	}
	return d
}

func (m *Manager) idle(d time.Duration) time.Duration {
	if d == 0 {
		return m.cfg.DefaultIdle
	}
	return d
}

// newID makes a session id: 24 random bytes, so ids cannot be guessed.
func newID() string {
	var b [24]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics instead)
	return "ses_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// idLen is the length of newID's ids.
const idLen = len("ses_") + 32

// madeByNewID is whether id has the shape of newID's ids: any other is
// no session's, answered without asking a RemoteBackend's store.
func madeByNewID(id string) bool {
	if len(id) != idLen || !strings.HasPrefix(id, "ses_") {
		return false
	}
	for _, r := range id[len("ses_"):] {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// lookupCtx finds owner's session; another owner's answers
// ErrNotFound, the same as one that does not exist.
//
// On a RemoteBackend a session this Manager does not hold may be held
// by the backend's store (another server made it, or this one before a
// restart): it is attached and held from then on. ctx ends the
// request's wait for that attach, never the attach itself, which
// concurrent requests for the session share.
func (m *Manager) lookupCtx(ctx context.Context, owner, id string) (*session, error) {
	m.mu.Lock()
	s, ok := m.sessions[id]
	m.mu.Unlock()
	if ok && s.owner == owner {
		return s, nil
	}
	if rb, remote := m.backend.(RemoteBackend); remote && !ok && madeByNewID(id) && !m.knownMissing(owner, id) {
		return m.adoptOnce(ctx, rb, owner, id)
	}
	return nil, fmt.Errorf("%w: no session %q", ErrNotFound, id)
}

// adoptOnce is adopt, once at a time per id: a request that finds an
// attach of the same id under way waits for it and answers as it did
// (its error, such as ErrBusy, not a 404 for a live session). One
// waiting on another owner's attach, whose answer is not its own, tries
// once more itself. A request whose ctx ends stops waiting; the attach
// goes on, bounded by remoteFindWait, for the others.
func (m *Manager) adoptOnce(ctx context.Context, rb RemoteBackend, owner, id string) (*session, error) {
	s, again, err := m.adoptOrWait(ctx, rb, owner, id)
	if again {
		s, _, err = m.adoptOrWait(ctx, rb, owner, id)
	}
	return s, err
}

// adoption is an attach of a RemoteBackend's session under way: done is
// closed once err, its answer to owner, is set.
type adoption struct {
	owner string
	done  chan struct{}
	err   error
}

// adoptOrWait starts the attach of id unless one is under way, and waits
// for it until ctx ends; again says that attach was another owner's and
// failed, so its answer is not this owner's.
func (m *Manager) adoptOrWait(ctx context.Context, rb RemoteBackend, owner, id string) (*session, bool, error) {
	m.mu.Lock()
	if s, ok := m.sessions[id]; ok {
		m.mu.Unlock()
		if s.owner == owner {
			return s, false, nil
		}
		return nil, false, fmt.Errorf("%w: no session %q", ErrNotFound, id)
	}
	a, busy := m.adopting[id]
	if !busy {
		a = &adoption{owner: owner, done: make(chan struct{})}
		m.adopting[id] = a
		go m.runAdoption(rb, id, a)
	}
	m.mu.Unlock()
	select {
	case <-a.done:
	case <-ctx.Done():
		return nil, false, fmt.Errorf("session %q: the request ended while the session was being attached: %w", id, ctx.Err())
	}
	if a.err != nil {
		if a.owner != owner {
			return nil, true, nil
		}
		return nil, false, a.err
	}
	s, err := m.lookupHeld(owner, id)
	return s, false, err
}

// runAdoption is attach a of id, for a.owner: detached from the request
// that started it, whose waiters it answers (adopt bounds it).
func (m *Manager) runAdoption(rb RemoteBackend, id string, a *adoption) {
	_, err := m.adopt(rb, a.owner, id)
	m.mu.Lock()
	delete(m.adopting, id)
	a.err = err
	m.mu.Unlock()
	close(a.done)
}

// lookupHeld is owner's session id if this Manager holds it, else
// ErrNotFound (an attach that just failed answered its own request).
func (m *Manager) lookupHeld(owner, id string) (*session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.sessions[id]; ok && s.owner == owner {
		return s, nil
	}
	return nil, fmt.Errorf("%w: no session %q", ErrNotFound, id)
}

// Holds is whether this Manager holds owner's session id itself, without
// asking a RemoteBackend's store: a server of several replicas forwards
// a request for a session it does not hold to the replica that does.
func (m *Manager) Holds(owner, id string) bool {
	_, err := m.lookupHeld(owner, id)
	return err == nil
}

// Get returns what is known of a session; ctx ends the wait for the
// attach of a session another server holds.
func (m *Manager) Get(ctx context.Context, owner, id string) (Info, error) {
	s, err := m.lookupCtx(ctx, owner, id)
	if err != nil {
		return Info{}, err
	}
	return s.info(), nil
}

// ListEverywhere returns owner's sessions, oldest first: on a
// RemoteBackend those every server holds (listRemote), else List's.
func (m *Manager) ListEverywhere(ctx context.Context, owner string) ([]Info, error) {
	infos := m.List(owner)
	if rb, ok := m.backend.(RemoteBackend); ok {
		return m.listRemote(ctx, rb, owner, infos)
	}
	return infos, nil
}

// List returns owner's sessions this Manager holds, oldest first.
func (m *Manager) List(owner string) []Info {
	m.mu.Lock()
	var list []*session
	for _, s := range m.sessions {
		if s.owner == owner {
			list = append(list, s)
		}
	}
	m.mu.Unlock()
	infos := make([]Info, 0, len(list))
	for _, s := range list {
		infos = append(infos, s.info())
	}
	sortInfos(infos)
	return infos
}

// Counts returns how many sessions are in each state, for metrics.
func (m *Manager) Counts() map[State]int {
	return m.counts(func(*session) bool { return true })
}

// CountsOf returns how many of owner's sessions are in each state, for
// the metrics that owner's key may see.
func (m *Manager) CountsOf(owner string) map[State]int {
	return m.counts(func(s *session) bool { return s.owner == owner })
}

// counts returns how many of the sessions keep picks are in each state.
func (m *Manager) counts(keep func(*session) bool) map[State]int {
	m.mu.Lock()
	list := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		if keep(s) {
			list = append(list, s)
		}
	}
	m.mu.Unlock()
	counts := map[State]int{}
	for _, st := range States {
		if st != StateGone {
			counts[st] = 0
		}
	}
	for _, s := range list {
		counts[s.currentState()]++
	}
	return counts
}

// Delete ends a session, killing whatever runs in it, and removes every
// trace of it on the host.
func (m *Manager) Delete(ctx context.Context, owner, id string) error {
	s, err := m.lookupCtx(ctx, owner, id)
	if err != nil {
		return err
	}
	m.endReleasing(s)
	return nil
}

// endReleasing is end for a session that ends for good (deleted,
// expired): a remote one's session is released in its backend's store
// too, which a server's Close leaves to the server that serves it next.
func (m *Manager) endReleasing(s *session) bool {
	return m.endWith(s, true)
}

// end stops s and forgets it; a second call for the same session waits
// for the first. What its cleanup fails at is logged, not returned: the
// session is gone all the same.
func (m *Manager) end(s *session) {
	m.endOnce(s)
}

// endOnce is end, saying whether this call ended s (false: another did),
// so that the reaper reports only the ends it made.
func (m *Manager) endOnce(s *session) bool {
	return m.endWith(s, false)
}

// endWith is endOnce, releasing a remote session's store record too
// when release says so: before the session leaves m.sessions, so that a
// request arriving meanwhile finds it stopping rather than attaching
// its Pod again from a record not yet released.
func (m *Manager) endWith(s *session, release bool) bool {
	if !s.stopping() {
		<-s.gone
		return false
	}
	m.cleanedUp(s, s.close())
	if s.firstExecEnded != nil {
		s.firstExecEnded() // ended before its first exec: refill now
	}
	if release {
		m.releaseRemote(s)
	}
	s.releaseTemplate()
	if ferr := m.forget(s); ferr != nil {
		m.cfg.OnStoreError(ferr)
	}
	m.mu.Lock()
	delete(m.sessions, s.id)
	m.mu.Unlock()
	m.giveBack(s)
	m.keep(s, 0)
	return true
}

// cleanedUp reports what closing s's sandbox failed to clean up, if anything:
// the session is gone all the same.
func (m *Manager) cleanedUp(s *session, err error) {
	if err != nil {
		m.cfg.Logger.Warn("closing the session's sandbox", "session", s.id, "backend", m.backend.Name(), "err", err)
	}
}

// Exec runs one step in owner's session; its own timeout must be under
// the timeout ceiling, as the session's was.
func (m *Manager) Exec(ctx context.Context, owner, id string, req ExecRequest, live Stream) (spec.Result, error) {
	if err := m.cfg.Ceilings.CheckTimeout(req.Timeout); err != nil {
		return spec.Result{}, err
	}
	s, err := m.lookupCtx(ctx, owner, id)
	if err != nil {
		return spec.Result{}, err
	}
	// A paused or snapshotted session resumes for the exec, whichever
	// front end asks.
	if err := m.resumeIfPaused(ctx, s); err != nil {
		return spec.Result{}, err
	}
	return s.exec(ctx, req, live)
}

// SetNetwork replaces the allow and deny rules of owner's session, which
// must have been made with the egress proxy; a paused session stays
// paused. ctx ends the wait for the attach of a session another server
// holds.
func (m *Manager) SetNetwork(ctx context.Context, owner, id string, allow, deny []string) (Info, error) {
	s, err := m.lookupCtx(ctx, owner, id)
	if err != nil {
		return Info{}, err
	}
	if err := s.ifDead(); err != nil {
		return Info{}, err
	}
	// The rules live in the host's egress proxy: a paused session's
	// change needs nothing of its frozen box, and it stays paused. A
	// snapshotted one has no box: its next one starts with the rules.
	// pauseMu keeps a snapshot or a resume from replacing the box
	// meanwhile, which would start the new one with the old rules.
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if !s.isBoxClosed() {
		if err := s.currentBox().SetNetwork(allow, deny); err != nil {
			return Info{}, err
		}
	}
	s.mu.Lock()
	s.spec.Network.Allow, s.spec.Network.Deny = allow, deny
	s.mu.Unlock()
	// The rules are in force; a record the Store cannot update only
	// reports older rules should this server crash.
	if err := m.save(s); err != nil {
		m.cfg.OnStoreError(err)
	}
	return s.info(), nil
}

// NetworkEvents are the egress proxy's decisions for owner's session;
// ctx ends the wait for the attach of a session another server holds.
func (m *Manager) NetworkEvents(ctx context.Context, owner, id string) ([]spec.NetworkEvent, error) {
	s, err := m.lookupCtx(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return s.currentBox().NetworkEvents(), nil
}

// Files opens owner's session's /workspace for host-side access; ctx
// ends the waits for an attach and a resume.
func (m *Manager) Files(ctx context.Context, owner, id string) (workspace.Files, error) {
	s, err := m.lookupCtx(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	// A snapshotted session's files are on disk as the host's; they are
	// served through a box again, as its sandbox user, like any other's.
	// A paused box whose agent serves its files resumes, as for an exec:
	// its frozen agent could not answer.
	switch state := s.currentState(); {
	case state == StatePaused && s.remoteFiles():
		ctx, cancel := context.WithTimeout(ctx, resumeWait)
		defer cancel()
		// paid as the Resume API and an exec pay, so pausing and then
		// asking for a file cannot cycle a box at half the cost
		if _, err := s.pace.wait(ctx, commandExecCost); err != nil {
			return nil, err
		}
		if err := m.resumeIfPaused(ctx, s); err != nil {
			return nil, err
		}
	case state == StateSnapshotted:
		ctx, cancel := context.WithTimeout(ctx, resumeWait)
		defer cancel()
		if err := m.resumeSnapshot(ctx, s); err != nil {
			return nil, err
		}
	}
	return s.workspace()
}

// resumeWait bounds the resume of a paused or snapshotted session for a
// call that has no context of its own (a file call, an interpreter
// reset), so a stuck restore cannot hold it forever.
const resumeWait = time.Minute

// Run runs a command or code once in a fresh sandbox built from o, for
// owner (it holds one of owner's slots while it runs).
func (m *Manager) Run(ctx context.Context, owner string, o SessionOptions, req ExecRequest, live Stream) (spec.Result, error) {
	s, err := m.newSessionSpec(o)
	if err != nil {
		return spec.Result{}, err
	}
	if s.Command, s.Env, err = oneShotCommand(req, append(s.Env, req.Env...)); err != nil {
		return spec.Result{}, err
	}
	if req.Timeout > 0 {
		s.Limits.Timeout = req.Timeout
	}
	if err := s.Validate(); err != nil {
		return spec.Result{}, err
	}
	if err := m.cfg.Ceilings.CheckTimeout(req.Timeout); err != nil {
		return spec.Result{}, err
	}
	var lease func()
	if s.Root, lease, err = m.resolveTemplate(o.Template, owner); err != nil {
		return spec.Result{}, err
	}
	defer lease()
	if err := checkLanguage(s.Root, req.Language); err != nil {
		return spec.Result{}, err
	}
	bytes := m.charge(s.Limits)
	if err := m.acquire(owner, true, bytes); err != nil {
		return spec.Result{}, err
	}
	defer m.runs.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(m.runsEnd, cancel)()
	var stdin []byte
	if len(req.Stdin) > 0 {
		stdin = req.Stdin
	}
	if box, ws, refill := m.pool.take(m.runShape(s)); box != nil {
		defer refill()
		return m.runPooled(ctx, owner, box, ws, s, readerOrNil(stdin), live)
	}
	defer m.release(owner, bytes)
	return m.backend.Run(ctx, s, readerOrNil(stdin), live)
}

// Close ends every session and the pool; the Manager takes no more work.
// Dead sessions are left in the Store, as they are: their files are kept
// for their owners until deleted or expired, whatever restarts between.
// Calling it again does nothing.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	list := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		// Dead and snapshotted sessions stay in the Store for the next
		// server: their files are on disk.
		if st := s.currentState(); st != StateDead && st != StateSnapshotted {
			list = append(list, s)
		}
	}
	m.mu.Unlock()
	close(m.stop)
	m.wg.Wait()
	// In parallel: a sandbox's teardown may wait (its init's exit, a
	// cgroup's last tasks), and a server going down with many sessions
	// must not wait for each in turn.
	var ended sync.WaitGroup
	for _, s := range list {
		ended.Go(func() { m.end(s) })
	}
	ended.Wait()
	m.pool.close()
	m.endRuns()
	m.runs.Wait()
	m.discards.Wait()
	return nil
}
