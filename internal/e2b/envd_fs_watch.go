package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/warden-sandbox/warden/internal/e2b/filesystempb"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// Bounds of watching. Each watcher is an inotify instance of the host's
// root, whose instances are few (fs.inotify.max_user_instances, 128 by
// default, shared with everything else the host's root runs), so they
// are counted per sandbox, per tenant and per host.
const (
	maxWatchersPerSandbox = 8
	// maxWatchersPerOwner is one API key's most, lowered to its share of
	// maxWatchersPerHost when there are more keys (see newWatchers).
	maxWatchersPerOwner = 16
	maxWatchersPerHost  = 64
	// maxWatchDirs bounds the directories one recursive watch covers.
	maxWatchDirs = 1024
	// maxWatchAdds bounds the directories one watch ever adds, counting
	// again those of a tree moved out and back in: each costs the host a
	// listing and an inotify watch, so a sandbox moving a big tree to and
	// fro would otherwise make the host walk it for ever.
	maxWatchAdds = 8 * maxWatchDirs
	// maxKeptEvents bounds what a polled watcher keeps between two
	// GetWatcherEvents; past it the watcher fails with data_loss.
	maxKeptEvents = 4096
	// watcherIdle removes a polled watcher nobody asked about for that
	// long, so a client that forgot it (or a sandbox that ended) does not
	// hold a slot for ever.
	watcherIdle = 10 * time.Minute
)

// change is one change in a watched tree: its name relative to the
// watched directory, its box path and what happened.
type change struct {
	name string
	path string
	op   filesystempb.EventType
}

// watchers counts live watchers and keeps the polled ones by id.
type watchers struct {
	mu       sync.Mutex
	total    int
	perBox   map[string]int
	perOwner map[string]int
	polled   map[string]*polledWatcher
	// killed is closed when the sandbox with watchers is killed, by box,
	// so its streamed watches end at once rather than at their next
	// keepalive; an entry goes with the box's last watcher.
	killed map[string]chan struct{}
	// ownerMax is one owner's most watchers.
	ownerMax int
}

// newWatchers counts watchers for owners API keys (0 for one): each gets
// its share of the host's watchers, at most maxWatchersPerOwner, as
// --max-sessions is shared, so a few keys cannot hold every slot.
func newWatchers(owners int) *watchers {
	return &watchers{
		perBox: map[string]int{}, perOwner: map[string]int{}, polled: map[string]*polledWatcher{},
		killed:   map[string]chan struct{}{},
		ownerMax: min(maxWatchersPerOwner, sandbox.Share(maxWatchersPerHost, owners)),
	}
}

// sandboxKilled ends the watchers of sandbox box at once: its streamed
// watches see their reserve's killed channel closed, its polled ones are
// removed (a later GetWatcherEvents finds no watcher, as on a sandbox gone).
func (ws *watchers) sandboxKilled(box string) {
	ws.mu.Lock()
	if ch := ws.killed[box]; ch != nil {
		close(ch)
		delete(ws.killed, box)
	}
	var gone []*polledWatcher
	for id, p := range ws.polled {
		if p.box == box {
			gone = append(gone, p)
			delete(ws.polled, id)
		}
	}
	ws.mu.Unlock()
	for _, p := range gone {
		p.idle.Stop()
		p.aw.stop()
	}
}

// reserve takes a watcher slot of sandbox box of owner, or says which
// bound is full; release gives it back, once. killed is closed when the
// sandbox is killed: taken with the slot, under the same lock, so a kill
// at any time after the slot is taken ends the watch at once.
func (ws *watchers) reserve(owner, box string) (release func(), killed <-chan struct{}, err error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	switch {
	case ws.perBox[box] >= maxWatchersPerSandbox:
		return nil, nil, kindErrorf(errTooMany, "the sandbox already has %d directory watchers, the most Warden allows; stop one first", maxWatchersPerSandbox)
	case ws.perOwner[owner] >= ws.ownerMax:
		return nil, nil, kindErrorf(errTooMany, "your sandboxes already have %d directory watchers, the most Warden allows one API key; stop one first", ws.ownerMax)
	case ws.total >= maxWatchersPerHost:
		return nil, nil, kindErrorf(errTooMany, "this Warden already runs %d directory watchers, the most it allows; retry later", maxWatchersPerHost)
	}
	ws.total++
	ws.perBox[box]++
	ws.perOwner[owner]++
	ch := ws.killed[box]
	if ch == nil {
		ch = make(chan struct{})
		ws.killed[box] = ch
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			ws.mu.Lock()
			defer ws.mu.Unlock()
			ws.total--
			decrement(ws.perBox, box)
			if ws.perBox[box] == 0 {
				delete(ws.killed, box)
			}
			decrement(ws.perOwner, owner)
		})
	}, ch, nil
}

// decrement lowers m[k], forgetting k at zero.
func decrement(m map[string]int, k string) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}

// watchStart checks a watch request and starts the inotify watch,
// holding one of the sandbox's slots until release.
func (f *fsService) watchStart(ctx context.Context, h http.Header, p string, recursive bool) (*activeWatch, error) {
	dir, wp, err := f.at(ctx, h, p)
	if err != nil {
		return nil, err
	}
	sb := sandboxFrom(ctx)
	release, killed, err := f.watchers.reserve(sb.Owner, sb.ID)
	if err != nil {
		return nil, fsConnectError(err)
	}
	t, err := startWatch(dir, wp, recursive)
	if err != nil {
		release()
		return nil, fsConnectError(err)
	}
	return &activeWatch{t: t, dir: dir, release: release, killed: killed, log: f.s.log}, nil
}

// activeWatch is a started watch and what ending it releases.
type activeWatch struct {
	t       *inotifyTree
	dir     workspace.Files
	release func()
	// killed is closed when the sandbox is killed (watchers.reserve).
	killed <-chan struct{}
	log    *slog.Logger
	once   sync.Once
}

// pump reads the watch's changes and hands each batch to deliver, until
// the watch fails or is closed, or deliver returns false.
func (a *activeWatch) pump(includeEntry bool, deliver func([]*filesystempb.FilesystemEvent, error) bool) {
	for {
		cs, err := a.t.read()
		evs := make([]*filesystempb.FilesystemEvent, 0, len(cs))
		for _, c := range cs {
			evs = append(evs, a.event(c, includeEntry))
		}
		if !deliver(evs, err) || err != nil {
			return
		}
	}
}

// event is c as E2B reports it; with includeEntry, a created, written or
// chmod-ed entry is described as it is now (a removed or renamed one is
// gone from that path, so it is not).
func (a *activeWatch) event(c change, includeEntry bool) *filesystempb.FilesystemEvent {
	ev := &filesystempb.FilesystemEvent{Name: validName(c.name), Type: c.op}
	switch c.op {
	case filesystempb.EventType_EVENT_TYPE_CREATE, filesystempb.EventType_EVENT_TYPE_WRITE, filesystempb.EventType_EVENT_TYPE_CHMOD:
		if !includeEntry {
			break
		}
		if e, err := a.dir.Stat(c.path); err == nil {
			ev.Entry = entryInfo(e, ownersOf(a.dir))
		}
	}
	return ev
}

// stop ends the watch and releases its slot, once.
func (a *activeWatch) stop() {
	a.once.Do(func() {
		if err := a.t.Close(); err != nil {
			a.log.Warn("e2b: ending a directory watch", "err", err)
		}
		a.release()
	})
}

// WatchDir streams a directory's changes: the start event once watching,
// then the changes as they come, and keepalives between them. The stream
// ends when the client goes, the Connect timeout passes, the watched
// directory or the sandbox goes, or changes were lost (data_loss).
func (f *fsService) WatchDir(ctx context.Context, req *connect.Request[filesystempb.WatchDirRequest], stream *connect.ServerStream[filesystempb.WatchDirResponse]) error {
	aw, err := f.watchStart(ctx, req.Header(), req.Msg.GetPath(), req.Msg.GetRecursive())
	if err != nil {
		return err
	}
	defer aw.stop()
	// Taken with the slot, before the watch starts: a kill at any time
	// after (a client with the start event may kill the sandbox at once)
	// finds it and ends the watch rather than its next keepalive.
	killed, sb := aw.killed, sandboxFrom(ctx)
	start := &filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Start{Start: &filesystempb.WatchDirResponse_StartEvent{}}}
	if err := stream.Send(start); err != nil {
		return err
	}
	type batch struct {
		evs []*filesystempb.FilesystemEvent
		err error
	}
	batches := make(chan batch)
	done := make(chan struct{})
	defer close(done)
	go aw.pump(req.Msg.GetIncludeEntry(), func(evs []*filesystempb.FilesystemEvent, err error) bool {
		select {
		case batches <- batch{evs, err}:
			return true
		case <-done:
			return false
		}
	})
	every := keepaliveEvery(req.Header())
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-killed:
			return fsConnectError(fmt.Errorf("%w: sandbox %s was killed", sandbox.ErrNotFound, sb.ID))
		case <-tick.C:
			if _, err := f.s.cfg.Sessions.Get(ctx, sb.Owner, sb.ID); err != nil {
				return fsConnectError(err)
			}
			ka := &filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Keepalive{Keepalive: &filesystempb.WatchDirResponse_KeepAlive{}}}
			if err := stream.Send(ka); err != nil {
				return err
			}
		case b := <-batches:
			for _, ev := range b.evs {
				msg := &filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Filesystem{Filesystem: ev}}
				if err := stream.Send(msg); err != nil {
					return err
				}
			}
			if b.err != nil {
				return fsConnectError(b.err)
			}
			tick.Reset(every)
		}
	}
}

// polledWatcher is a watcher of CreateWatcher: its changes wait for
// GetWatcherEvents.
type polledWatcher struct {
	box  string // the sandbox it watches; only that sandbox's calls see it
	aw   *activeWatch
	idle *time.Timer
	mu   sync.Mutex
	evs  []*filesystempb.FilesystemEvent
	err  error // terminal: the watch ended
}

// keep is the pump's delivery: it stores evs, up to maxKeptEvents.
func (p *polledWatcher) keep(evs []*filesystempb.FilesystemEvent, err error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return false
	}
	if len(p.evs)+len(evs) > maxKeptEvents {
		err = kindErrorf(errEventsLost, "the watcher kept %d events, the most Warden keeps, and lost the next; call GetWatcherEvents more often, or watch a smaller tree", maxKeptEvents)
	} else {
		p.evs = append(p.evs, evs...)
	}
	p.err = err
	return err == nil
}

// CreateWatcher starts a watcher whose changes are fetched with
// GetWatcherEvents; it ends with RemoveWatcher, after watcherIdle without
// a call, or when its directory or sandbox goes (the next call says so).
func (f *fsService) CreateWatcher(ctx context.Context, req *connect.Request[filesystempb.CreateWatcherRequest]) (*connect.Response[filesystempb.CreateWatcherResponse], error) {
	aw, err := f.watchStart(ctx, req.Header(), req.Msg.GetPath(), req.Msg.GetRecursive())
	if err != nil {
		return nil, err
	}
	var b [16]byte
	rand.Read(b[:])
	id := "w" + hex.EncodeToString(b[:])
	p := &polledWatcher{box: sandboxFrom(ctx).ID, aw: aw, idle: time.AfterFunc(watcherIdle, func() { f.removeWatcher(id) })}
	f.watchers.mu.Lock()
	f.watchers.polled[id] = p
	f.watchers.mu.Unlock()
	// A watch that failed frees its inotify instance and slot at once;
	// its error waits for the next GetWatcherEvents.
	go func() {
		aw.pump(req.Msg.GetIncludeEntry(), p.keep)
		aw.stop()
	}()
	return connect.NewResponse(&filesystempb.CreateWatcherResponse{WatcherId: id}), nil
}

// polledFor finds watcher id of the request's sandbox: another sandbox's
// watcher is as unknown as a missing one.
func (f *fsService) polledFor(ctx context.Context, id string) (*polledWatcher, error) {
	f.watchers.mu.Lock()
	p, ok := f.watchers.polled[id]
	f.watchers.mu.Unlock()
	if !ok || p.box != sandboxFrom(ctx).ID {
		return nil, connect.NewError(connect.CodeNotFound, kindErrorf(workspace.ErrNotFound, "watcher %q not found; create one with CreateWatcher", id))
	}
	return p, nil
}

// GetWatcherEvents answers the changes since the last call; a watcher
// that ended, or whose sandbox did, answers why (and is removed).
func (f *fsService) GetWatcherEvents(ctx context.Context, req *connect.Request[filesystempb.GetWatcherEventsRequest]) (*connect.Response[filesystempb.GetWatcherEventsResponse], error) {
	p, err := f.polledFor(ctx, req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	if sb := sandboxFrom(ctx); sb != nil {
		if _, err := f.s.cfg.Sessions.Get(ctx, sb.Owner, sb.ID); err != nil {
			f.removeWatcher(req.Msg.GetWatcherId())
			return nil, fsConnectError(err)
		}
	}
	p.idle.Reset(watcherIdle)
	p.mu.Lock()
	evs, werr := p.evs, p.err
	p.evs = nil
	p.mu.Unlock()
	if werr != nil {
		f.removeWatcher(req.Msg.GetWatcherId())
		return nil, fsConnectError(werr)
	}
	return connect.NewResponse(&filesystempb.GetWatcherEventsResponse{Events: evs}), nil
}

// RemoveWatcher ends a watcher.
func (f *fsService) RemoveWatcher(ctx context.Context, req *connect.Request[filesystempb.RemoveWatcherRequest]) (*connect.Response[filesystempb.RemoveWatcherResponse], error) {
	if _, err := f.polledFor(ctx, req.Msg.GetWatcherId()); err != nil {
		return nil, err
	}
	f.removeWatcher(req.Msg.GetWatcherId())
	return connect.NewResponse(&filesystempb.RemoveWatcherResponse{}), nil
}

// removeWatcher forgets watcher id and ends its watch.
func (f *fsService) removeWatcher(id string) {
	f.watchers.mu.Lock()
	p, ok := f.watchers.polled[id]
	delete(f.watchers.polled, id)
	f.watchers.mu.Unlock()
	if ok {
		p.idle.Stop()
		p.aw.stop()
	}
}
