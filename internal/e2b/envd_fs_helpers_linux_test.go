package e2b

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	fspb "github.com/warden-sandbox/warden/internal/e2b/filesystempb"
	"github.com/warden-sandbox/warden/internal/e2b/filesystempb/filesystempbconnect"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/testhost"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// fsSandboxUID is the host uid and gid the tests' workspace belongs to
// when they run as root, as a real sandbox user's would.
const fsSandboxUID = 4343

// fsSessions is the Manager as the files API sees it: one sandbox whose
// workspace is a temporary directory.
type fsSessions struct {
	sandbox.Sessions // the calls the files API never makes panic
	dir              *workspace.Dir
	gone             bool
	fail             error // what Files answers, if set
}

func (f *fsSessions) Files(_ context.Context, owner, id string) (workspace.Files, error) {
	if f.fail != nil {
		return nil, f.fail
	}
	if f.gone || owner != "alice" || id != "sbx-alice" {
		return nil, sandbox.ErrNotFound
	}
	return f.dir, nil
}

func (f *fsSessions) Get(_ context.Context, owner, id string) (sandbox.Info, error) {
	if f.gone || owner != "alice" || id != "sbx-alice" {
		return sandbox.Info{}, sandbox.ErrNotFound
	}
	return sandbox.Info{}, nil
}

// fsHarness serves the envd file routes for the sandbox sbx-alice (or
// whichever the X-Test-Sandbox header names), as the router would after
// checking its token.
type fsHarness struct {
	ws, out   string // the workspace and a directory outside it
	uid, gid  int
	sess      *fsSessions
	svc       *fsService
	transfers *transfers
	srv       *httptest.Server
	fs        filesystempbconnect.FilesystemClient
}

func newFSHarness(t *testing.T) *fsHarness {
	t.Helper()
	base := t.TempDir()
	h := &fsHarness{ws: filepath.Join(base, "ws"), out: filepath.Join(base, "out"), uid: os.Geteuid(), gid: os.Getegid()}
	if h.uid == 0 {
		h.uid, h.gid = fsSandboxUID, fsSandboxUID
	}
	for _, d := range []string{h.ws, h.out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(h.out, 0o777); err != nil {
		t.Fatal(err)
	}
	h.give(t)
	dir, err := workspace.Open(h.ws, h.uid, h.gid, workspace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	h.sess = &fsSessions{dir: dir}
	s := &Server{cfg: Config{Sessions: h.sess}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	mux := http.NewServeMux()
	h.svc = &fsService{s: s, watchers: newWatchers(0)}
	h.svc.routes(mux)
	h.transfers = newTransfers()
	h.transfers.routes(s, mux)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sb := &Sandbox{ID: "sbx-alice", Owner: "alice"}
		if id := r.Header.Get("X-Test-Sandbox"); id != "" {
			sb = &Sandbox{ID: id, Owner: "bob"}
		}
		mux.ServeHTTP(w, r.WithContext(withSandbox(r.Context(), sb)))
	}))
	t.Cleanup(h.srv.Close)
	h.fs = filesystempbconnect.NewFilesystemClient(h.srv.Client(), h.srv.URL, connect.WithProtoJSON())
	return h
}

// watchers is the service's watcher registry, for tests to look into.
func (h *fsHarness) watchers() *watchers { return h.svc.watchers }

// watch creates a polled watcher of path and returns its id.
func (h *fsHarness) watch(t *testing.T, path string) string {
	t.Helper()
	res, err := h.fs.CreateWatcher(context.Background(), connect.NewRequest(&fspb.CreateWatcherRequest{Path: path}))
	if err != nil {
		t.Fatalf("CreateWatcher(%s): %v", path, err)
	}
	return res.Msg.GetWatcherId()
}

// waitSlotsFree waits, bounded, until no watcher holds a slot: a
// watcher's end frees its slot after the answer that says so.
func (h *fsHarness) waitSlotsFree(t *testing.T, what string) {
	t.Helper()
	testhost.WaitFor(t, what, func() bool {
		ws := h.watchers()
		ws.mu.Lock()
		defer ws.mu.Unlock()
		return ws.total == 0
	})
}

// give hands everything in the workspace to the sandbox user, as if the
// sandbox had made it.
func (h *fsHarness) give(t *testing.T) {
	t.Helper()
	err := filepath.Walk(h.ws, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, h.uid, h.gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// plant makes what the sandbox would: files (content), directories
// (content "/") and symbolic links (content "->target").
func (h *fsHarness) plant(t *testing.T, entries map[string]string) {
	t.Helper()
	for name, content := range entries {
		p := filepath.Join(h.ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case content == "/":
			err = os.MkdirAll(p, 0o755)
		case len(content) > 2 && content[:2] == "->":
			err = os.Symlink(content[2:], p)
		default:
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	h.give(t)
}

// decoy is a file outside the workspace a planted link points to; check
// fails if anything read or changed it.
func (h *fsHarness) decoy(t *testing.T) (path string, check func()) {
	t.Helper()
	path = filepath.Join(h.out, "secret")
	content := []byte("SECRET outside the workspace")
	if err := os.WriteFile(path, content, 0o666); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, past, past); err != nil {
		t.Fatal(err)
	}
	return path, func() {
		t.Helper()
		got, err := os.ReadFile(path)
		fi, serr := os.Stat(path)
		if err != nil || !bytes.Equal(got, content) || serr != nil || !fi.ModTime().Equal(past) {
			t.Errorf("decoy %s changed: %q, %v", path, got, err)
		}
		ents, err := os.ReadDir(h.out)
		if err != nil || len(ents) != 1 {
			t.Errorf("outside directory holds %d entries (%v), want only the decoy", len(ents), err)
		}
	}
}

// asUser is a request option naming the user as the SDK does.
func asUser[T any](req *connect.Request[T], user string) *connect.Request[T] {
	req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
	return req
}

// wantCode fails unless err is a Connect error of code (nil: success).
func wantCode(t *testing.T, what string, err error, code connect.Code) {
	t.Helper()
	switch {
	case code == 0 && err != nil:
		t.Errorf("%s: error %v, want success", what, err)
	case code != 0 && connect.CodeOf(err) != code:
		t.Errorf("%s: error %v (code %v), want code %v", what, err, connect.CodeOf(err), code)
	}
}
