package workspace

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// sandboxID is the unprivileged host uid and gid the tests act as.
const sandboxID = 4242

// identities are the two ways a Dir acts: as another (sandbox) user, which
// needs root, and as the process's own user (rootless).
var identities = []struct {
	name     string
	uid, gid int
	root     bool
}{
	{name: "sandbox user", uid: sandboxID, gid: sandboxID, root: true},
	{name: "own user", uid: os.Geteuid(), gid: os.Getegid()},
}

// env is a workspace owned by the acting user, next to a directory
// outside it that everyone may write: following a link to it would
// succeed, so only Warden's refusal keeps it intact.
type env struct {
	d        *Dir
	ws, out  string
	uid, gid int
}

func newEnv(t *testing.T, uid, gid int, lim Limits) *env {
	t.Helper()
	base, err := os.MkdirTemp("", "warden-workspace-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	e := &env{ws: filepath.Join(base, "ws"), out: filepath.Join(base, "outside"), uid: uid, gid: gid}
	for _, dir := range []string{e.ws, e.out} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	chmod(t, base, 0o755)
	chmod(t, e.out, 0o777)
	if err := os.Chown(e.ws, uid, gid); err != nil {
		t.Fatal(err)
	}
	if e.d, err = Open(e.ws, uid, gid, lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.d.Close() })
	return e
}

// forEachIdentity runs test once per identity, skipping the sandbox user
// without root.
func forEachIdentity(t *testing.T, lim Limits, test func(t *testing.T, e *env)) {
	for _, id := range identities {
		t.Run(id.name, func(t *testing.T) {
			if id.root {
				testhost.RequireRoot(t)
			}
			test(t, newEnv(t, id.uid, id.gid, lim))
		})
	}
}

// decoy is a file outside the workspace that must never change.
type decoy struct {
	path    string
	content []byte
	mtime   time.Time
}

func newDecoy(t *testing.T, path string, perm os.FileMode) decoy {
	t.Helper()
	content := []byte("DECOY " + path)
	if err := os.WriteFile(path, content, perm); err != nil {
		t.Fatal(err)
	}
	chmod(t, path, perm)
	past := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, past, past); err != nil {
		t.Fatal(err)
	}
	return decoy{path: path, content: content, mtime: past}
}

func (dc decoy) check(t *testing.T) {
	t.Helper()
	got, err := os.ReadFile(dc.path)
	if err != nil || !bytes.Equal(got, dc.content) {
		t.Errorf("decoy %s = %q, %v; want %q unchanged", dc.path, got, err, dc.content)
	}
	if fi, err := os.Stat(dc.path); err != nil || !fi.ModTime().Equal(dc.mtime) {
		t.Errorf("decoy %s modified (mtime %v, %v); want mtime %v", dc.path, fi.ModTime(), err, dc.mtime)
	}
}

// checkNames fails unless dir holds exactly names.
func checkNames(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if len(got) != len(names) {
		t.Errorf("%s holds %q, want %q", dir, got, names)
		return
	}
	for i := range got {
		if got[i] != names[i] {
			t.Errorf("%s holds %q, want %q", dir, got, names)
			return
		}
	}
}

func readAll(t *testing.T, d *Dir, p string) ([]byte, Entry, error) {
	t.Helper()
	rc, ent, err := d.Read(p)
	if err != nil {
		return nil, ent, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading %q: %v", p, err)
	}
	return b, ent, nil
}

func owner(t *testing.T, path string) (int, int) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

func chmod(t *testing.T, path string, perm os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
}

// wantErr fails unless err matches want (nil for success).
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Errorf("%s error = %v, want %v", what, err, want)
	}
}

// readGrown opens a Read reader of "growing", a file of "abc" in the
// workspace, and then appends "def" to the file, as a sandbox growing it
// after the open; the reader is closed when the test ends.
func (e *env) readGrown(t *testing.T) io.ReadCloser {
	t.Helper()
	path := filepath.Join(e.ws, "growing")
	writeFile(t, path, "abc", 0o644)
	rc, _, err := e.d.Read("growing")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("def")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("growing the file after the open: %v", err)
	}
	return rc
}

// mkdirs makes each of dirs, with its parents, in the workspace (as the
// test's user: give hands them to the acting one).
func (e *env) mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		if err := os.MkdirAll(filepath.Join(e.ws, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// give hands everything in the workspace to the acting user, as if the
// sandbox had created it.
func (e *env) give(t *testing.T) {
	t.Helper()
	err := filepath.WalkDir(e.ws, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, e.uid, e.gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}
