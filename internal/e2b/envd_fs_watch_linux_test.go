package e2b

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fspb "github.com/warden-sandbox/warden/internal/e2b/filesystempb"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// watchBound bounds every wait for an event; a pass never waits for it.
const watchBound = 20 * time.Second

// startWatchDir opens a WatchDir stream and reads its start event.
func startWatchDir(t *testing.T, h *fsHarness, ctx context.Context, path string, recursive bool) *connect.ServerStreamForClient[fspb.WatchDirResponse] {
	t.Helper()
	st, err := h.fs.WatchDir(ctx, connect.NewRequest(&fspb.WatchDirRequest{Path: path, Recursive: recursive, IncludeEntry: true}))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() || st.Msg().GetStart() == nil {
		t.Fatalf("WatchDir(%s): first message %v (%v), want the start event", path, st.Msg(), st.Err())
	}
	return st
}

// nextEvent is the stream's next filesystem event, skipping keepalives.
func nextEvent(t *testing.T, st *connect.ServerStreamForClient[fspb.WatchDirResponse]) *fspb.FilesystemEvent {
	t.Helper()
	for st.Receive() {
		if ev := st.Msg().GetFilesystem(); ev != nil {
			return ev
		}
	}
	t.Fatalf("stream ended without an event: %v", st.Err())
	return nil
}

func TestFSWatchDir(t *testing.T) {
	h := newFSHarness(t)
	_, check := h.decoy(t)
	h.plant(t, map[string]string{"w/": "/", "w/sub/": "/", "w/sub/outlink": "->" + h.out})
	ctx, cancel := context.WithTimeout(context.Background(), watchBound)
	defer cancel()

	flat := startWatchDir(t, h, ctx, "w", false)
	deep := startWatchDir(t, h, ctx, "/home/user/w", true)
	// A change below sub reaches only the recursive watch; the one after
	// it, in w itself, reaches both, so the flat watch's first event
	// proves it never saw the first.
	if err := os.WriteFile(filepath.Join(h.ws, "w/sub/inner"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.ws, "w/top"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, flat); ev.GetName() != "top" || ev.GetType() != fspb.EventType_EVENT_TYPE_CREATE {
		t.Errorf("flat watch: first event %v, want the creation of top", ev)
	}
	// An upload shows as its file's creation, never its temporary name.
	if r := h.do(t, "POST", q("path", "w/up.txt"), map[string]string{"Content-Type": "application/octet-stream"}, strings.NewReader("up")); r.status != 200 {
		t.Fatalf("upload: status %d (%s)", r.status, r.message)
	}
	for seen := 0; seen < 16; seen++ {
		ev := nextEvent(t, flat)
		if strings.HasPrefix(ev.GetName(), workspace.TempPrefix) {
			t.Errorf("flat watch reported %v, an upload's temporary name", ev)
		}
		if ev.GetName() == "up.txt" {
			break
		}
	}
	ev := nextEvent(t, deep)
	if ev.GetName() != "sub/inner" || ev.GetType() != fspb.EventType_EVENT_TYPE_CREATE || ev.GetEntry().GetPath() != "/home/user/w/sub/inner" {
		t.Errorf("recursive watch: first event %v, want the creation of sub/inner with its entry", ev)
	}
	// A directory made after the watch started is watched too.
	if err := os.MkdirAll(filepath.Join(h.ws, "w/new/deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.ws, "w/new/deeper/f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The later of the two: "new/deeper" may be seen either as its own
	// creation or (when watched after it was made) through the walk.
	for seen := 0; seen < 16; seen++ {
		if ev := nextEvent(t, deep); ev.GetName() == "new/deeper/f" {
			break
		} else if seen == 15 {
			t.Errorf("recursive watch never reported new/deeper/f")
		}
	}
	// The planted link to a directory outside is never watched through:
	// a change there is not seen, the next one inside is.
	outside := filepath.Join(h.out, "planted")
	if err := os.WriteFile(outside, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.ws, "w/last"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for seen := 0; seen < 32; seen++ {
		ev := nextEvent(t, deep)
		if strings.Contains(ev.GetName(), "planted") {
			t.Errorf("recursive watch reported %v, a change outside the workspace", ev)
		}
		if ev.GetName() == "last" {
			break
		}
	}
	cancel()
	if err := os.Remove(outside); err != nil {
		t.Fatal(err)
	}
	check()
}

func TestFSWatchDirErrors(t *testing.T) {
	h := newFSHarness(t)
	h.plant(t, map[string]string{"file": "x", "outlink": "->" + h.out})
	for _, tt := range []struct {
		path string
		code connect.Code
	}{
		{path: "outlink", code: connect.CodeInvalidArgument},
		{path: "file", code: connect.CodeInvalidArgument},
		{path: "missing", code: connect.CodeNotFound},
		{path: "/etc", code: connect.CodeInvalidArgument},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), watchBound)
		st, err := h.fs.WatchDir(ctx, connect.NewRequest(&fspb.WatchDirRequest{Path: tt.path}))
		if err == nil {
			st.Receive()
			err = st.Err()
		}
		wantCode(t, "WatchDir("+tt.path+")", err, tt.code)
		cancel()
	}
}

func TestFSWatchers(t *testing.T) {
	h := newFSHarness(t)
	h.plant(t, map[string]string{"w/": "/"})
	bg := context.Background()
	id := h.watch(t, "w")
	if err := os.WriteFile(filepath.Join(h.ws, "w/f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	for try := 0; try < 200 && len(got) < 2; try++ {
		res, err := h.fs.GetWatcherEvents(bg, connect.NewRequest(&fspb.GetWatcherEventsRequest{WatcherId: id}))
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range res.Msg.GetEvents() {
			got = append(got, ev.GetType().String()+" "+ev.GetName())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(got) < 2 || got[0] != "EVENT_TYPE_CREATE f" || got[1] != "EVENT_TYPE_WRITE f" {
		t.Errorf("events %q, want the creation and the write of f", got)
	}
	// Another sandbox cannot see or end this watcher.
	other := connect.NewRequest(&fspb.RemoveWatcherRequest{WatcherId: id})
	other.Header().Set("X-Test-Sandbox", "sbx-bob")
	_, err := h.fs.RemoveWatcher(bg, other)
	wantCode(t, "RemoveWatcher from another sandbox", err, connect.CodeNotFound)
	_, err = h.fs.RemoveWatcher(bg, connect.NewRequest(&fspb.RemoveWatcherRequest{WatcherId: id}))
	wantCode(t, "RemoveWatcher", err, 0)
	_, err = h.fs.GetWatcherEvents(bg, connect.NewRequest(&fspb.GetWatcherEventsRequest{WatcherId: id}))
	wantCode(t, "GetWatcherEvents after RemoveWatcher", err, connect.CodeNotFound)

	// A sandbox has at most maxWatchersPerSandbox; removing one frees it.
	var ids []string
	for range maxWatchersPerSandbox {
		ids = append(ids, h.watch(t, "w"))
	}
	_, err = h.fs.CreateWatcher(bg, connect.NewRequest(&fspb.CreateWatcherRequest{Path: "w"}))
	wantCode(t, "CreateWatcher past the bound", err, connect.CodeResourceExhausted)
	if err != nil && !strings.Contains(err.Error(), "stop one") {
		t.Errorf("CreateWatcher past the bound: error %q does not say how to fix it", err)
	}
	_, err = h.fs.RemoveWatcher(bg, connect.NewRequest(&fspb.RemoveWatcherRequest{WatcherId: ids[0]}))
	wantCode(t, "RemoveWatcher", err, 0)
	res, err := h.fs.CreateWatcher(bg, connect.NewRequest(&fspb.CreateWatcherRequest{Path: "w"}))
	wantCode(t, "CreateWatcher after one was removed", err, 0)
	for _, id := range append(ids[1:], res.Msg.GetWatcherId()) {
		_, err = h.fs.RemoveWatcher(bg, connect.NewRequest(&fspb.RemoveWatcherRequest{WatcherId: id}))
		wantCode(t, "RemoveWatcher", err, 0)
	}
	ws := h.watchers()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.total != 0 || len(ws.perBox) != 0 || len(ws.perOwner) != 0 || len(ws.polled) != 0 {
		t.Errorf("after removing every watcher: %d live, %v per sandbox, %v per owner, %d polled; want none", ws.total, ws.perBox, ws.perOwner, len(ws.polled))
	}
}

// TestFSWatcherEnds: a watcher whose directory is removed says so at the
// next poll, and its slot is free again.
func TestFSWatcherEnds(t *testing.T) {
	h := newFSHarness(t)
	h.plant(t, map[string]string{"w/": "/"})
	bg := context.Background()
	id := h.watch(t, "w")
	if err := os.Remove(filepath.Join(h.ws, "w")); err != nil {
		t.Fatal(err)
	}
	for try := 0; ; try++ {
		_, err := h.fs.GetWatcherEvents(bg, connect.NewRequest(&fspb.GetWatcherEventsRequest{WatcherId: id}))
		if err != nil {
			wantCode(t, "GetWatcherEvents of a removed directory", err, connect.CodeNotFound)
			break
		}
		if try == 500 {
			t.Fatal("the watcher of a removed directory never ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A watcher of a sandbox that ended ends at its next poll.
	if err := os.Mkdir(filepath.Join(h.ws, "w2"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.give(t)
	id2 := h.watch(t, "w2")
	h.sess.gone = true
	_, err := h.fs.GetWatcherEvents(bg, connect.NewRequest(&fspb.GetWatcherEventsRequest{WatcherId: id2}))
	wantCode(t, "GetWatcherEvents in an ended sandbox", err, connect.CodeNotFound)
	h.sess.gone = false
	_, err = h.fs.GetWatcherEvents(bg, connect.NewRequest(&fspb.GetWatcherEventsRequest{WatcherId: id2}))
	wantCode(t, "GetWatcherEvents after its sandbox ended", err, connect.CodeNotFound)
	if n := len(h.watchers().polled); n != 0 {
		t.Errorf("%d polled watchers left, want none", n)
	}
}

// TestFSWatchMovedDir: a directory moved out of a recursive watch is no
// longer reported under its old name; one moved in is watched.
func TestFSWatchMovedDir(t *testing.T) {
	h := newFSHarness(t)
	h.plant(t, map[string]string{"w/sub/": "/", "elsewhere/": "/", "elsewhere/in/": "/"})
	ctx, cancel := context.WithTimeout(context.Background(), watchBound)
	defer cancel()
	st := startWatchDir(t, h, ctx, "w", true)
	if err := os.Rename(filepath.Join(h.ws, "w/sub"), filepath.Join(h.ws, "gone")); err != nil {
		t.Fatal(err)
	}
	// Once the move is reported, the moved directory is let go.
	for seen := 0; ; seen++ {
		ev := nextEvent(t, st)
		if ev.GetName() == "sub" && ev.GetType() == fspb.EventType_EVENT_TYPE_RENAME {
			break
		}
		if seen == 8 {
			t.Fatal("the move of sub was never reported")
		}
	}
	steps := []func() error{
		func() error { return os.WriteFile(filepath.Join(h.ws, "gone/after-move"), nil, 0o644) },
		func() error { return os.Rename(filepath.Join(h.ws, "elsewhere/in"), filepath.Join(h.ws, "w/in")) },
		func() error { return os.WriteFile(filepath.Join(h.ws, "w/in/new"), nil, 0o644) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for len(got) < 8 {
		ev := nextEvent(t, st)
		got = append(got, ev.GetType().String()+" "+ev.GetName())
		if ev.GetName() == "in/new" {
			break
		}
	}
	for _, g := range got {
		if strings.Contains(g, "after-move") {
			t.Errorf("events %q report a change in a directory moved out of the watch", got)
		}
	}
	if got[len(got)-1] != "EVENT_TYPE_CREATE in/new" {
		t.Errorf("events %q, want the creation of in/new last", got)
	}
}

// TestFSWatchWalkBound: a tree too large to walk at once fails the
// recursive watch, naming the bound, rather than cost unbounded work.
func TestFSWatchWalkBound(t *testing.T) {
	h := newFSHarness(t)
	h.plant(t, map[string]string{"w/": "/", "big/": "/"})
	// Spread over directories, so no one listing is over its own bound.
	per := maxListEntries / 10
	for i := range maxListEntries + per {
		d := filepath.Join(h.ws, "big", fmt.Sprint(i/per))
		if i%per == 0 {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.give(t)
	_, err := h.fs.CreateWatcher(context.Background(), connect.NewRequest(&fspb.CreateWatcherRequest{Path: "/home/user", Recursive: true}))
	wantCode(t, "CreateWatcher of a tree over the walk bound", err, connect.CodeResourceExhausted)
	if err != nil && !strings.Contains(err.Error(), fmt.Sprint(maxListEntries)) {
		t.Errorf("error %q does not name the bound %d", err, maxListEntries)
	}
	ctx, cancel := context.WithTimeout(context.Background(), watchBound)
	defer cancel()
	st := startWatchDir(t, h, ctx, "w", true)
	if err := os.Rename(filepath.Join(h.ws, "big"), filepath.Join(h.ws, "w/big")); err != nil {
		t.Fatal(err)
	}
	for st.Receive() {
	}
	wantCode(t, "WatchDir after a tree over the walk bound moved in", st.Err(), connect.CodeResourceExhausted)
	// The handler releases its slot after its answer.
	h.waitSlotsFree(t, "every watcher's slot freed after both failed")
}

// TestFSWatcherOverflow: a polled watcher keeps at most maxKeptEvents;
// past them it says events were lost (data_loss) instead of growing or
// silently dropping them, and frees its slot.
func TestFSWatcherOverflow(t *testing.T) {
	h := newFSHarness(t)
	h.plant(t, map[string]string{"w/": "/"})
	bg := context.Background()
	id := h.watch(t, "w")
	for i := range maxKeptEvents + 100 {
		if err := os.WriteFile(filepath.Join(h.ws, "w", fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The pump frees the slot once it has read past the bound.
	h.waitSlotsFree(t, "the overflowing watcher's slot freed")
	_, err := h.fs.GetWatcherEvents(bg, connect.NewRequest(&fspb.GetWatcherEventsRequest{WatcherId: id}))
	wantCode(t, "GetWatcherEvents past the bound", err, connect.CodeDataLoss)
	if err != nil && !strings.Contains(err.Error(), fmt.Sprint(maxKeptEvents)) {
		t.Errorf("error %q does not name the bound %d", err, maxKeptEvents)
	}
}

// TestFSWatchEndsAtKill: killing a sandbox ends its watchers at once: a
// streamed watch ends not_found before its next keepalive (90 s, past
// the test's bound, and the session still answers as live), and a
// polled watcher is gone.
func TestFSWatchEndsAtKill(t *testing.T) {
	h := newFSHarness(t)
	h.plant(t, map[string]string{"w/": "/"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st := startWatchDir(t, h, ctx, "w", false)
	res, err := h.fs.CreateWatcher(ctx, connect.NewRequest(&fspb.CreateWatcherRequest{Path: "w"}))
	if err != nil {
		t.Fatal(err)
	}
	h.watchers().sandboxKilled("sbx-alice")
	for st.Receive() {
		if st.Msg().GetKeepalive() == nil {
			t.Errorf("after the kill: got %v, want the end", st.Msg())
		}
	}
	wantCode(t, "WatchDir of a killed sandbox", st.Err(), connect.CodeNotFound)
	_, err = h.fs.GetWatcherEvents(ctx, connect.NewRequest(&fspb.GetWatcherEventsRequest{WatcherId: res.Msg.GetWatcherId()}))
	wantCode(t, "GetWatcherEvents of a killed sandbox", err, connect.CodeNotFound)
	h.watchers().mu.Lock()
	defer h.watchers().mu.Unlock()
	if len(h.watchers().polled) != 0 || len(h.watchers().killed) != 0 {
		t.Errorf("after the kill: %d polled watchers and %d kill channels kept, want none", len(h.watchers().polled), len(h.watchers().killed))
	}
}

// TestFSWatchAddsBound: a tree moved out of a recursive watch and back in
// again and again is walked again each time; past maxWatchAdds directories
// over the watch's life it ends, naming the bound, rather than make the
// host walk it for ever.
func TestFSWatchAddsBound(t *testing.T) {
	h := newFSHarness(t)
	const dirs = 64
	entries := map[string]string{}
	for i := range dirs - 1 {
		entries[fmt.Sprintf("w/tree/%d/", i)] = "/"
	}
	h.plant(t, entries)
	tr, err := startWatch(h.sess.dir, "/workspace/w", true)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	moves := 0
	for ; moves < maxWatchAdds/dirs+2; moves++ { // out and in again, as events would
		tr.forget("/workspace/w/tree")
		if _, err = tr.walk("/workspace/w/tree", false); err != nil {
			break
		}
	}
	if !errors.Is(err, errTooMany) || !strings.Contains(err.Error(), fmt.Sprint(maxWatchAdds)) {
		t.Fatalf("after %d moves: error %v, want one naming the bound %d", moves, err, maxWatchAdds)
	}
	if want := (maxWatchAdds - 1 - dirs) / dirs; moves != want { // the first walk added w and the tree
		t.Errorf("the watch ended after %d moves of a %d-directory tree, want %d", moves, dirs, want)
	}
}
