package state

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

func openTemp(t *testing.T) *Dir {
	t.Helper()
	d, err := Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestSessionRoundTrip(t *testing.T) {
	d := openTemp(t)
	want := Session{
		ID: "ses_abcdefghijklmnopqrstuvwx", Owner: "0123456789abcdef", Backend: "native", Workspace: "ws_00aa",
		ServerPID: 42, CreatedAt: time.Unix(100, 0).UTC(), ExpiresAt: time.Unix(200, 0).UTC(), IdleTimeout: time.Minute,
		Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"example.com"}},
	}
	if err := d.SaveSession(want); err != nil {
		t.Fatalf("SaveSession() = %v", err)
	}
	got, err := d.Sessions()
	if err != nil || len(got) != 1 {
		t.Fatalf("Sessions() = %v, %v; want one record", got, err)
	}
	want.Version = Version
	if g := got[0]; g.ID != want.ID || g.Owner != want.Owner || g.Workspace != want.Workspace || g.Limits != want.Limits ||
		!g.ExpiresAt.Equal(want.ExpiresAt) || g.Network.Allow[0] != "example.com" || g.Version != Version {
		t.Errorf("Sessions()[0] = %+v, want %+v", g, want)
	}
	if err := d.RemoveSession(want.ID); err != nil {
		t.Fatalf("RemoveSession() = %v", err)
	}
	if err := d.RemoveSession(want.ID); err != nil {
		t.Errorf("RemoveSession() of a missing record = %v, want nil", err)
	}
	if got, _ := d.Sessions(); len(got) != 0 {
		t.Errorf("Sessions() after remove = %v, want none", got)
	}
}

func TestCorruptRecordsAreMovedAside(t *testing.T) {
	d := openTemp(t)
	dir := filepath.Join(d.Path(), sessionsDir)
	good := Session{ID: "ses_good_0123456789abcdefghij"}
	if err := d.SaveSession(good); err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"ses_garbage_0123456789abcdef.json": "{not json",
		"ses_version_0123456789abcdef.json": `{"version":99,"id":"ses_version_0123456789abcdef"}`,
		"ses_renamed_0123456789abcdef.json": `{"version":1,"id":"ses_other_0123456789abcdefgh"}`,
		"ses_escape_0123456789abcdefg.json": `{"version":1,"id":"ses_escape_0123456789abcdefg","workspace":"../../etc"}`,
		"ses_unknown_0123456789abcdef.json": `{"version":1,"id":"ses_unknown_0123456789abcdef","extra":1}`,
	}
	for name, body := range bad {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".ses_cut.json.tmp"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := d.Sessions()
	if len(got) != 1 || got[0].ID != good.ID {
		t.Errorf("Sessions() = %v, want only the good record", got)
	}
	for name := range bad {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Sessions() error = %v, want it to name %s", err, name)
		}
		if _, serr := os.Stat(filepath.Join(dir, name+corruptSuffix)); serr != nil {
			t.Errorf("%s was not moved aside: %v", name, serr)
		}
	}
	if _, serr := os.Stat(filepath.Join(dir, ".ses_cut.json.tmp")); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("a cut-short temporary record is still there: %v", serr)
	}
	if again, err := d.Sessions(); len(again) != 1 || err != nil {
		t.Errorf("second Sessions() = %v, %v; want the good record and no error", again, err)
	}
}

func TestSaveRejectsBadIDs(t *testing.T) {
	d := openTemp(t)
	for _, id := range []string{"", "../x", "a/b", "ses x", strings.Repeat("a", 101)} {
		if err := d.SaveSession(Session{ID: id}); err == nil {
			t.Errorf("SaveSession(id %q) = nil, want an error", id)
		}
	}
}

func TestSecondServerIsRefused(t *testing.T) {
	d := openTemp(t)
	_, err := Open(d.Path())
	want := "in use by another warden (pid " + strconv.Itoa(os.Getpid()) + ")"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("second Open() = %v, want an error containing %q", err, want)
	}
	d.Close()
	d2, err := Open(d.Path())
	if err != nil {
		t.Fatalf("Open() after Close = %v", err)
	}
	d2.Close()
}

func TestRelativePathIsRefused(t *testing.T) {
	if _, err := Open("state"); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("Open(relative) = %v, want an error", err)
	}
}

func TestReadOnlyDirectoryFailsAtOpen(t *testing.T) {
	dir := testhost.Tmpfs(t, "1m")
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	_, err := Open(filepath.Join(dir, "state"))
	if !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "is read-only") || strings.Contains(err.Error(), "\n") {
		t.Errorf("Open(read-only) = %v, want one line with ErrStorage and \"is read-only\"", err)
	}
}

func TestFullDirectory(t *testing.T) {
	dir := testhost.Tmpfs(t, "64k")
	d, err := Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer d.Close()
	testhost.Fill(t, filepath.Join(dir, "filler"))
	err = d.SaveSession(Session{ID: "ses_full_0123456789abcdefghij", Limits: spec.DefaultLimits})
	if !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "is full") {
		t.Errorf("SaveSession() on a full disk = %v, want ErrStorage, \"is full\"", err)
	}
	d.Close()
	_, err = Open(filepath.Join(dir, "state"))
	if !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "is full") {
		t.Errorf("Open() on a full disk = %v, want ErrStorage, \"is full\"", err)
	}
}

func TestWorkspaceLifecycle(t *testing.T) {
	testhost.RequireRoot(t)
	d := openTemp(t)
	w, err := d.NewWorkspace(1<<20, 100)
	if err != nil {
		t.Fatalf("NewWorkspace() = %v", err)
	}
	if !d.Mounted(w.Name) {
		t.Fatalf("Mounted(%s) = false right after NewWorkspace", w.Name)
	}
	if err := os.WriteFile(filepath.Join(w.Path, "f"), []byte("x"), 0o644); err != nil {
		t.Fatalf("writing in a new workspace: %v", err)
	}
	if names, err := d.Workspaces(); err != nil || len(names) != 1 || names[0] != w.Name {
		t.Errorf("Workspaces() = %v, %v; want [%s]", names, err, w.Name)
	}
	if err := d.SealWorkspace(w.Name); err != nil {
		t.Fatalf("SealWorkspace() = %v", err)
	}
	if err := os.WriteFile(filepath.Join(w.Path, "g"), []byte("x"), 0o644); !errors.Is(err, unix.EROFS) {
		t.Errorf("writing in a sealed workspace = %v, want EROFS", err)
	}
	if b, err := os.ReadFile(filepath.Join(w.Path, "f")); err != nil || string(b) != "x" {
		t.Errorf("reading a sealed workspace = %q, %v", b, err)
	}
	if err := d.DropWorkspace(w.Name); err != nil {
		t.Fatalf("DropWorkspace() = %v", err)
	}
	if d.Mounted(w.Name) {
		t.Error("Mounted() after DropWorkspace = true")
	}
	if err := d.DropWorkspace(w.Name); err != nil {
		t.Errorf("second DropWorkspace() = %v, want nil", err)
	}
	if err := d.DropWorkspace("../x"); err == nil {
		t.Error("DropWorkspace(\"../x\") = nil, want an error")
	}
}

func TestUnsafeDirectories(t *testing.T) {
	testhost.RequireRoot(t)
	tests := []struct {
		name    string
		prepare func(t *testing.T, parent string) string
		want    string
	}{
		{"parent writable by others", func(t *testing.T, parent string) string {
			must(t, os.Chmod(parent, 0o777))
			return filepath.Join(parent, "state")
		}, "writable by other users"},
		{"parent owned by another user", func(t *testing.T, parent string) string {
			must(t, os.Chown(parent, 4242, 4242))
			return filepath.Join(parent, "state")
		}, "belongs to uid 4242"},
		{"state directory owned by another user", func(t *testing.T, parent string) string {
			dir := filepath.Join(parent, "state")
			must(t, os.Mkdir(dir, 0o700))
			must(t, os.Chown(dir, 4242, 4242))
			return dir
		}, "belongs to uid 4242"},
		{"a file in place of sessions", func(t *testing.T, parent string) string {
			dir := filepath.Join(parent, "state")
			must(t, os.Mkdir(dir, 0o700))
			must(t, os.WriteFile(filepath.Join(dir, sessionsDir), nil, 0o600))
			return dir
		}, "making"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "parent")
			must(t, os.Mkdir(parent, 0o755))
			_, err := Open(tt.prepare(t, parent))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestLooseStateDirectoryIsMadePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	must(t, os.Mkdir(dir, 0o755))
	d, err := Open(dir)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer d.Close()
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state directory mode = %v, %v; want 0700", fi.Mode().Perm(), err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
