package docker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"
)

// memEngine is a fake engine, an in-process engineAPI: it records every
// call, keeps the containers it made until they are removed, fails any
// call named in fail, and lets a test end a container (die) as a crash
// would.
type memEngine struct {
	mu sync.Mutex
	// calls are "Method id-or-name", in order.
	calls []string
	// fail makes the named method ("Create") return its error.
	fail map[string]error
	// live are the containers made and not removed, by id, each with
	// the channel closed when it stops; status holds its exit status.
	live   map[string]chan struct{}
	status map[string]int
	// made are the create requests, by container name.
	made map[string]ContainerConfig
	// pid is what Pid answers for a started container.
	pid int
	// onStart, when set, runs once a container has started (an init
	// that connects to the host).
	onStart func()
	// list is what List answers; listLabel records its filter.
	list      []Container
	listLabel string
	// ctxImport makes Import fail once its ctx has ended, as the
	// engine's does.
	ctxImport bool
	// images are the refs HasImage knows; imported records Import's.
	images   map[string]bool
	imported []string
	volumes  []string
	logs     string
	next     int
	// waiting counts the Waits that found their container and block on
	// it, so a test can end a container only once its watch waits.
	waiting int
}

func newMemEngine() *memEngine {
	return &memEngine{
		fail: map[string]error{}, live: map[string]chan struct{}{}, status: map[string]int{},
		made: map[string]ContainerConfig{}, images: map[string]bool{},
	}
}

// record notes a call and returns the error the test set for it.
func (f *memEngine) record(method, arg string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method+" "+arg)
	return f.fail[method]
}

func (f *memEngine) setFail(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[method] = err
}

// left are the ids of containers not removed, sorted.
func (f *memEngine) left() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id := range f.live {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// count is how many calls of method were made.
func (f *memEngine) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if len(c) > len(method) && c[:len(method)+1] == method+" " {
			n++
		}
	}
	return n
}

// die stops container id, as a crash or an OOM kill would (SIGKILL).
func (f *memEngine) die(id string) { f.exit(id, 128+9) }

// exit stops container id with exit status status, unless it stopped.
func (f *memEngine) exit(id string, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ch, ok := f.live[id]; ok {
		select {
		case <-ch:
		default:
			f.status[id] = status
			close(ch)
		}
	}
}

func notFound(id string) error {
	return &APIError{Status: http.StatusNotFound, Message: "No such container: " + id}
}

func (f *memEngine) Ping(context.Context) error { return f.record("Ping", "") }

func (f *memEngine) Create(_ context.Context, name string, c ContainerConfig) (string, error) {
	if err := f.record("Create", name); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	id := fmt.Sprintf("c%d", f.next)
	f.live[id], f.made[name] = make(chan struct{}), c
	return id, nil
}

func (f *memEngine) Start(_ context.Context, id string) error {
	if err := f.record("Start", id); err != nil {
		return err
	}
	if f.onStart != nil {
		go f.onStart()
	}
	return nil
}

func (f *memEngine) Kill(_ context.Context, id string) error {
	if err := f.record("Kill", id); err != nil {
		return err
	}
	f.die(id)
	return nil
}

// Pause and Unpause record the call and answer its fail, if any.
func (f *memEngine) Pause(_ context.Context, id string) error   { return f.record("Pause", id) }
func (f *memEngine) Unpause(_ context.Context, id string) error { return f.record("Unpause", id) }

// Remove removes a container, stopping it first, as force=1 does.
func (f *memEngine) Remove(_ context.Context, id string) error {
	if err := f.record("Remove", id); err != nil {
		return err
	}
	f.die(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.live, id)
	return nil
}

// Wait blocks until the container stops or ctx ends, as the engine's
// wait?condition=next-exit does.
func (f *memEngine) Wait(ctx context.Context, id string) (int, error) {
	if err := f.record("Wait", id); err != nil {
		return 0, err
	}
	f.mu.Lock()
	ch, ok := f.live[id]
	if ok {
		f.waiting++
	}
	f.mu.Unlock()
	if !ok {
		return 0, notFound(id)
	}
	select {
	case <-ch:
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.status[id], nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (f *memEngine) Pid(_ context.Context, id string) (int, error) {
	if err := f.record("Pid", id); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pid, nil
}

func (f *memEngine) List(_ context.Context, label string) ([]Container, error) {
	if err := f.record("List", label); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listLabel = label
	return f.list, nil
}

func (f *memEngine) ImageVolumes(_ context.Context, ref string) ([]string, error) {
	if err := f.record("ImageVolumes", ref); err != nil {
		return nil, err
	}
	return f.volumes, nil
}

func (f *memEngine) HasImage(_ context.Context, ref string) (bool, error) {
	if err := f.record("HasImage", ref); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.images[ref], nil
}

func (f *memEngine) Import(ctx context.Context, repo, tag string, tarball io.Reader, _ ...string) error {
	if err := f.record("Import", repo+":"+tag); err != nil {
		return err
	}
	if f.ctxImport && ctx.Err() != nil {
		return ctx.Err()
	}
	if _, err := io.Copy(io.Discard, tarball); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imported = append(f.imported, repo+":"+tag)
	f.images[repo+":"+tag] = true
	return nil
}

func (f *memEngine) Load(_ context.Context, archive io.Reader) error {
	if err := f.record("Load", ""); err != nil {
		return err
	}
	_, err := io.Copy(io.Discard, archive)
	return err
}

func (f *memEngine) Logs(_ context.Context, id string) (string, error) {
	if err := f.record("Logs", id); err != nil {
		return "", err
	}
	return f.logs, nil
}

// The fake must stay an engineAPI as the interface grows.
var _ engineAPI = (*memEngine)(nil)

// awaitWaiting returns once n Waits block on their container, failing t
// after bound: the watch starts in its own goroutine, and a container
// removed before its Wait arrives is one the engine no longer knows.
func (f *memEngine) awaitWaiting(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(bound); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		f.mu.Lock()
		w := f.waiting
		f.mu.Unlock()
		if w >= n {
			return
		}
	}
	t.Fatalf("the box's watch did not wait on its container within %v", bound)
}
