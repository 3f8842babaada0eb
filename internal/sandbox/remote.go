package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// RemoteBackend is a Backend whose sessions live outside this process,
// in a store several servers share (kubernetes: a SandboxClaim each), so
// that any server answers for any session and a server's crash loses
// none. The Manager names such a session before its box starts, asks the
// backend for a session it does not hold, and leaves the warm pool and
// the reaping of sessions no server holds to the backend.
type RemoteBackend interface {
	Backend
	// Claim starts session r's box, recording r where every server
	// finds it; ctx bounds the start only. It refuses, with ErrTooMany,
	// an owner holding r.MaxPerOwner sessions across every server.
	Claim(ctx context.Context, r RemoteSession, s spec.Spec) (Box, error)
	// Find attaches to owner's session id, which another server (or an
	// earlier life of this one) started: ErrNotFound when there is none
	// or it is another owner's, ErrDead-wrapping when it died. The
	// RemoteSession is the session as recorded, with a Note saying what
	// the attach could not keep. The recorded limits are clamped to ceil:
	// the store is one other components can write.
	Find(ctx context.Context, owner, id string, ceil spec.Ceilings) (Box, RemoteSession, error)
	// Reap ends the sessions no server holds that are past their TTL or
	// idle timeout, or dead; several servers may run it at once.
	Reap(ctx context.Context) error
	// List is owner's sessions as the store records them, whichever
	// server holds them (one bounded read of the store, not of each
	// session's box), each with the State its record tells.
	List(ctx context.Context, owner string) ([]RemoteSession, error)
}

// RemoteSession is a session of a RemoteBackend as its store records it.
type RemoteSession struct {
	ID, Owner string
	// Template names the backend's template ("" for its default).
	Template string
	// TTL and Idle are asked at Claim; Created, Expires and LastActive
	// are what Find read back.
	TTL, Idle                    time.Duration
	Created, Expires, LastActive time.Time
	Limits                       spec.Limits
	// Network is the session's network policy as Find read it back (its
	// box has its egress with these rules); the zero value is --net none.
	Network spec.NetworkPolicy
	// MaxPerOwner is Owner's limit of sessions (Config.MaxPerOwner), set
	// at Claim: the Manager counts only its own, so Claim counts every
	// server's and refuses past it with ErrTooMany (0: no limit).
	MaxPerOwner int
	// Note says, in one line, what a Find's attach lost (a new box's
	// processes), for the server's log.
	Note string
	// State and Reason are what List's record tells of a session this
	// server may not hold: StateCreating while its box is being
	// started, StateDead (Reason saying why) when the record says it
	// died, else StateReady (whether it is busy only its server knows).
	State  State
	Reason string
}

// remoteListWait bounds the store's listing of an owner's sessions.
const remoteListWait = 10 * time.Second

// listRemote is held (owner's sessions this Manager holds, as it holds
// them) with owner's others in rb's store, as their records tell, oldest
// first: a client behind several servers sees all its sessions wherever
// it asks. The records' limits are clamped to this server's ceilings, as
// an attach would; one past its expiry is left out (the store ends it),
// and so is one whose id a lookup would refuse (not newID's shape): the
// store is one other components can write.
// The listing takes one of the remoteLists slots, its own and not the
// lookups' (remoteFinds), so that listings cannot starve other keys'
// attaches; one that finds them all taken until ctx ends is busy. And
// each key's listings are paced (listRate, a *ListPacedError past it),
// as each is a LIST of the store whose cost every tenant shares.
func (m *Manager) listRemote(ctx context.Context, rb RemoteBackend, owner string, held []Info) ([]Info, error) {
	ctx, cancel := context.WithTimeout(ctx, remoteListWait)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("listing this key's sessions across the servers: %w", err)
	}
	if err := m.paceList(owner); err != nil {
		return nil, fmt.Errorf("listing this key's sessions across the servers: %w", err)
	}
	if !m.takeShare(m.listsBy, owner) {
		return nil, fmt.Errorf("%w: listing this key's sessions across the servers: this key has %d listing under way, its share; retry once it ends", ErrBusy, remoteListsPerKey)
	}
	defer m.giveShare(m.listsBy, owner)
	select {
	case m.lists <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: listing this key's sessions across the servers: this server has %d listings under way; retry shortly", ErrBusy, remoteLists)
	}
	recs, err := rb.List(ctx, owner)
	<-m.lists
	if err != nil {
		return nil, &RemoteListError{Err: fmt.Errorf("listing this key's sessions across the servers: %w", err)}
	}
	have := make(map[string]bool, len(held))
	for _, i := range held {
		have[i.ID] = true
	}
	out := held
	now := time.Now()
	bogus := 0
	for _, r := range recs {
		if !madeByNewID(r.ID) {
			bogus++
			continue
		}
		if have[r.ID] || (!r.Expires.IsZero() && !now.Before(r.Expires)) {
			continue
		}
		lim, _ := m.cfg.Ceilings.Clamp(r.Limits)
		out = append(out, Info{
			ID: r.ID, State: r.State, Reason: r.Reason, Template: r.Template,
			CreatedAt: r.Created, LastUsedAt: r.LastActive, ExpiresAt: r.Expires, IdleTimeout: r.Idle,
			Limits: lim, Network: spec.NetworkPolicy{Mode: spec.NetNone},
		})
	}
	if bogus > 0 {
		m.cfg.Logger.Warn("listing a key's sessions: skipped records whose id no session of this server's could have (written by another than Warden)", "records", bogus)
	}
	sortInfos(out)
	return out, nil
}

// RemoteListError is a RemoteBackend's failed List: its Error names the
// store's failure for the operator (it may name the cluster's address or
// labels); Public is the one line for the tenant, which front ends
// answer as a server that cannot serve now (503): failing the whole
// listing rather than answering this server's sessions alone, which a
// client would read as the others ended.
type RemoteListError struct {
	// Err is the store's failure, with its context.
	Err error
}

func (e *RemoteListError) Error() string { return e.Err.Error() }
func (e *RemoteListError) Unwrap() error { return e.Err }

// Public says the listing failed without the store's detail.
func (e *RemoteListError) Public() string {
	return "listing this key's sessions: the sessions store shared by the servers did not answer; retry shortly"
}

// releaser is a Box whose session outlives the box's Close (a remote
// one): Release ends the session itself, for Delete and expiry. A
// server shutting down only closes, leaving the session to another.
type releaser interface {
	Release(ctx context.Context) error
}

// ReleaseWait bounds a remote session's release at its end (and a
// RemoteBackend's own releases).
const ReleaseWait = 30 * time.Second

// releaseRemote releases s's session in its backend's store, where the
// box is a remote one, logging a failure: the session ends locally all
// the same, and the backend's Reap is the backstop.
func (m *Manager) releaseRemote(s *session) {
	r, ok := s.currentBox().(releaser)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReleaseWait)
	defer cancel()
	if err := r.Release(ctx); err != nil && !errors.Is(err, ErrNotFound) {
		m.cfg.Logger.Warn("releasing the session's remote sandbox", "session", s.id, "backend", m.backend.Name(), "err", err)
	}
}

// remoteReapEvery is how often a RemoteBackend's Reap runs: it lists
// every session of the store, so not every second as the local reaper.
const remoteReapEvery = 30 * time.Second

// refuseRemote refuses op (snapshot, fork) on a RemoteBackend, whose
// sessions' files are in the remote box, not on this host's disk where
// snapshots are kept.
func (m *Manager) refuseRemote(op string) error {
	if _, ok := m.backend.(RemoteBackend); ok {
		return fmt.Errorf("%w: %s: a %s session's files live in its remote sandbox, not on this server's disk where snapshots are kept", ErrUnsupported, op, m.backend.Name())
	}
	return nil
}

// remoteReapWait bounds one pass of a RemoteBackend's Reap.
const remoteReapWait = time.Minute

// remoteReapLoop runs the RemoteBackend's Reap every `every` until the
// Manager closes, logging failures (the next pass tries again).
func (m *Manager) remoteReapLoop(rb RemoteBackend, every time.Duration) {
	defer m.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), remoteReapWait)
			if err := rb.Reap(ctx); err != nil {
				m.cfg.Logger.Warn("reaping remote sessions", "backend", m.backend.Name(), "err", err)
			}
			cancel()
		}
	}
}

// remoteFindWait bounds the lookup of a session another server holds.
const remoteFindWait = 30 * time.Second

// adopt attaches owner's session id from the RemoteBackend's store,
// which this Manager did not hold, and holds it from now on: as the
// Manager's own, with the recorded TTL, idle timeout and limits.
func (m *Manager) adopt(rb RemoteBackend, owner, id string) (*session, error) {
	ctx, cancel := context.WithTimeout(context.Background(), remoteFindWait)
	defer cancel()
	box, r, err := m.find(ctx, rb, owner, id)
	if err != nil {
		return nil, err
	}
	s := spec.Spec{Limits: r.Limits, Network: r.Network}
	if s.Network.Mode == "" {
		s.Network.Mode = spec.NetNone
	}
	bytes := m.charge(s.Limits)
	if err := m.acquireSlot(owner, false, false, bytes); err != nil {
		m.cleanedUpBox(id, box.Close())
		return nil, err
	}
	now := time.Now()
	ses := &session{
		id: id, owner: owner, box: box, spec: s, state: StateReady, files: m.cfg.Files,
		created: r.Created, lastUsed: now, expires: r.Expires, idle: r.Idle,
		slot: true, gone: make(chan struct{}), pace: newExecPacer(s.Limits.CPUs, m.cfg.ExecPace),
		lease: func() {},
	}
	m.mu.Lock()
	// adoptOnce makes this the only attach of id, so only Close can
	// have come between.
	if m.closed {
		m.mu.Unlock()
		m.cleanedUpBox(id, box.Close())
		m.release(owner, bytes)
		return nil, fmt.Errorf("%w: the server is shutting down", ErrClosed)
	}
	m.sessions[id] = ses
	m.held[id] = bytes
	m.wg.Add(1)
	go m.watchBox(ses)
	m.mu.Unlock()
	if r.Note != "" {
		m.cfg.Logger.Info("serving a session another server started", "session", id, "backend", m.backend.Name(), "note", r.Note)
	}
	return ses, nil
}

// cleanedUpBox logs what closing session id's box failed at.
func (m *Manager) cleanedUpBox(id string, err error) {
	if err != nil {
		m.cfg.Logger.Warn("closing the session's sandbox", "session", id, "backend", m.backend.Name(), "err", err)
	}
}

// Bounds of the lookups of sessions this Manager does not hold, which
// any request naming an unknown id makes of the shared store.
const (
	// remoteFinds bounds the Finds under way at once.
	remoteFinds = 16
	// remoteFindsPerKey is one key's share of remoteFinds: a Find holds
	// its slot through the Pod's attach (seconds when the Pod is busy),
	// so without a share one tenant's requests for sessions held
	// elsewhere could take every slot and leave every other tenant's
	// lookups busy. A key holds at most this many, and one holding any
	// takes another only while more than this many stay free (see
	// shares): past it, that key's lookups alone are busy, and busy keys
	// together leave the last slots to keys holding none.
	remoteFindsPerKey = remoteFinds / 4
	// remoteLists bounds the Lists under way at once, apart from
	// remoteFinds: however many listings tenants keep open, the lookups
	// that attaches need keep their slots.
	remoteLists = 2
	// remoteListsPerKey is one key's share of remoteLists: each listing
	// is a LIST of the shared store, and one key must leave the other
	// slot to the rest.
	remoteListsPerKey = 1
	// missingFor is how long an id Find answered ErrNotFound is answered
	// so without asking again: ids are random, so none appears later.
	missingFor = 10 * time.Second
	// maxMissing bounds the ids remembered as missing.
	maxMissing = 4096
)

// knownMissing is whether owner's id was answered ErrNotFound within
// missingFor.
func (m *Manager) knownMissing(owner, id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.missing[owner+"\x00"+id]
	return ok && time.Since(t) < missingFor
}

// noteMissing remembers that owner's id is no session, dropping the
// expired entries (or, when all are young, all of them) once full.
func (m *Manager) noteMissing(owner, id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.missing) >= maxMissing {
		now := time.Now()
		for k, t := range m.missing {
			if now.Sub(t) >= missingFor {
				delete(m.missing, k)
			}
		}
		if len(m.missing) >= maxMissing {
			clear(m.missing)
		}
	}
	m.missing[owner+"\x00"+id] = time.Now()
}

// find is rb.Find within the bound of remoteFinds at once: a lookup
// that finds them all taken until ctx ends is busy. An id found to be
// no session is remembered as such (see knownMissing).
func (m *Manager) find(ctx context.Context, rb RemoteBackend, owner, id string) (box Box, r RemoteSession, err error) {
	err = m.bounded(ctx, owner, id, func(ctx context.Context) error {
		box, r, err = rb.Find(ctx, owner, id, m.cfg.Ceilings)
		return err
	})
	return box, r, err
}

// GuardLookup runs look, a lookup of owner's session id in a
// RemoteBackend's store made beside the Manager (a server asking which
// replica holds the session), under the bounds of the Manager's own, so
// that a tenant's unknown ids cost the store no more that way: an id
// newID cannot make, or one found missing within missingFor, is
// ErrNotFound without a call; lookups share Find's remoteFinds slots
// (busy when none frees before ctx ends); and ErrNotFound from look is
// remembered.
func (m *Manager) GuardLookup(ctx context.Context, owner, id string, look func(context.Context) error) error {
	if !madeByNewID(id) || m.knownMissing(owner, id) {
		return fmt.Errorf("%w: no session %q", ErrNotFound, id)
	}
	return m.bounded(ctx, owner, id, look)
}

// bounded runs look in one of the remoteFinds slots, busy when none
// frees before ctx ends or owner holds its share of them (see shares),
// and remembers an id it finds missing.
func (m *Manager) bounded(ctx context.Context, owner, id string, look func(context.Context) error) error {
	if !m.takeShare(m.findsBy, owner) {
		return fmt.Errorf("%w: session %q: this key has lookups of sessions this server does not hold under way, as many as its share of the server's %d allows (at most %d, and none of the last %d, kept for other keys); retry shortly", ErrBusy, id, remoteFinds, remoteFindsPerKey, remoteFindsPerKey)
	}
	defer m.giveShare(m.findsBy, owner)
	select {
	case m.finds <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: session %q: this server has %d lookups of sessions it does not hold under way; retry shortly", ErrBusy, id, remoteFinds)
	}
	defer func() { <-m.finds }()
	err := look(ctx)
	if errors.Is(err, ErrNotFound) {
		m.noteMissing(owner, id)
	}
	return err
}
