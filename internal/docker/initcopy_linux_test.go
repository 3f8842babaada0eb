package docker

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// testInitDir points initDir and initLock into a temporary state
// directory for the test, never the host's, and unmounts the tmpfs
// leaseInit mounts there when the test ends.
func testInitDir(t *testing.T) string {
	t.Helper()
	testhost.RequireRoot(t)
	state := t.TempDir()
	oldDir, oldLock := initDir, initLock
	initDir, initLock = filepath.Join(state, "lib"), filepath.Join(state, "lib.lock")
	t.Cleanup(func() {
		if mounted() {
			if err := unix.Unmount(initDir, unix.MNT_DETACH); err != nil {
				t.Errorf("unmounting %s: %v", initDir, err)
			}
		}
		initDir, initLock = oldDir, oldLock
	})
	return state
}

// TestLeaseInitKeepsOneCopy leases the copies of two inits in turn: each
// lease finds its own copy, whole and executable, and the other gone; what
// stays (the tmpfs and its lock) is not a leak to doctor.
func TestLeaseInitKeepsOneCopy(t *testing.T) {
	state := testInitDir(t)
	dir := t.TempDir()
	var srcs []string
	for _, name := range []string{"a", "b"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("init "+name), 0o755); err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, p)
	}
	var prev string
	for _, src := range append(srcs, srcs[1]) {
		p, release, err := leaseInit(src)
		if err != nil {
			t.Fatalf("leaseInit(%s): %v", src, err)
		}
		got, err := os.ReadFile(p)
		fi, serr := os.Stat(p)
		want, _ := os.ReadFile(src)
		if err != nil || serr != nil || string(got) != string(want) || fi.Mode().Perm() != 0o555 {
			t.Errorf("copy of %s at %s: %q (%v, %v), want %q mode 0555", src, p, got, err, serr, want)
		}
		if ents, _ := os.ReadDir(initDir); len(ents) != 1 {
			t.Errorf("after leasing %s, %s holds %d entries, want 1", src, initDir, len(ents))
		}
		if prev != "" && prev != p {
			if _, err := os.Stat(prev); !os.IsNotExist(err) {
				t.Errorf("the previous copy %s is still there (%v)", prev, err)
			}
		}
		if err := release(); err != nil {
			t.Errorf("release: %v", err)
		}
		prev = p
	}
	if !mounted() {
		t.Errorf("%s is not a mount of its own", initDir)
	}
	if got := boxname.StaleDirs(state); len(got) != 0 {
		t.Errorf("doctor's Stale(%s) = %q, want nothing: the init's tmpfs and lock are kept on purpose", state, got)
	}
}

// TestInitNameIsTheBuilds names copies of one Go binary (this test's)
// at two paths, and of two other files: the name follows the content's
// build identity, not where or when the file was written, so it is the
// same on every host and tells a tenant nothing about the one it is on.
func TestInitNameIsTheBuilds(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyOf := func(name string, content []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, content, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{self, copyOf("again", bin), copyOf("a", []byte("init a")), copyOf("a2", []byte("init a")), copyOf("b", []byte("init b"))}
	names := make([]string, len(paths))
	for i, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		names[i], err = initName(io.NewSectionReader(f, 0, fi.Size()))
		f.Close()
		if err != nil {
			t.Fatalf("initName(%s): %v", p, err)
		}
	}
	if goBuildID(mustOpen(t, self)) == "" {
		t.Errorf("goBuildID(%s) is empty, want this test binary's build ID", self)
	}
	for _, tt := range []struct {
		i, j int
		same bool
	}{{0, 1, true}, {2, 3, true}, {0, 2, false}, {2, 4, false}} {
		if got := names[tt.i] == names[tt.j]; got != tt.same {
			t.Errorf("names of %s and %s: %q and %q, want same=%v", paths[tt.i], paths[tt.j], names[tt.i], names[tt.j], tt.same)
		}
	}
}

// mustOpen opens p for the rest of the test.
func mustOpen(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
