package vmkernel

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// cacheDirCases are caches build.sh must refuse to build into and Find
// to read from (or accept, ok), one table for both so that the shell's
// and Go's rule stay one: each setup returns the cache path below base.
var cacheDirCases = []struct {
	name  string
	setup func(t *testing.T, base string) string
	ok    bool
}{
	{"root's 0755 dirs", func(t *testing.T, base string) string {
		return mkdirs(t, base, "a", 0o755, "cache", 0o755)
	}, true},
	{"sticky world-writable parent", func(t *testing.T, base string) string {
		return mkdirs(t, base, "a", os.ModeSticky|0o777, "cache", 0o755)
	}, true},
	{"world-writable cache", func(t *testing.T, base string) string {
		return mkdirs(t, base, "a", 0o755, "cache", 0o777)
	}, false},
	{"group-writable parent", func(t *testing.T, base string) string {
		return mkdirs(t, base, "a", 0o775, "cache", 0o755)
	}, false},
	{"world-writable parent", func(t *testing.T, base string) string {
		return mkdirs(t, base, "a", 0o777, "cache", 0o755)
	}, false},
	{"symlinked cache", func(t *testing.T, base string) string {
		mkdirs(t, base, "a", 0o755, "real", 0o755)
		symlink(t, "real", filepath.Join(base, "a", "cache"))
		return filepath.Join(base, "a", "cache")
	}, false},
	{"symlinked ancestor", func(t *testing.T, base string) string {
		mkdirs(t, base, "a", 0o755, "cache", 0o755)
		symlink(t, "a", filepath.Join(base, "link"))
		return filepath.Join(base, "link", "cache")
	}, false},
	{"parent of another user", func(t *testing.T, base string) string {
		p := mkdirs(t, base, "a", 0o755, "cache", 0o755)
		chown(t, filepath.Dir(p), 65534)
		return p
	}, false},
	{"cache of another user", func(t *testing.T, base string) string {
		p := mkdirs(t, base, "a", 0o755, "cache", 0o755)
		chown(t, p, 65534)
		return p
	}, false},
}

// TestBuildScriptChecksCache: build.sh (as root) builds only into a
// cache that it and every directory above are root's real directories
// writable by no one else (a sticky ancestor passes), as Find reads only
// such a cache; it makes a missing cache with mode 0755.
func TestBuildScriptChecksCache(t *testing.T) {
	testhost.RequireRoot(t)
	for _, tt := range cacheDirCases {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.setup(t, baseDir(t))
			out, err := exec.Command("bash", "build.sh", "--check-cache", dir).CombinedOutput()
			if got := err == nil; got != tt.ok {
				t.Errorf("build.sh --check-cache: got ok=%v (%v: %s), want ok=%v", got, err, out, tt.ok)
			}
			f, err := cache{dir: dir, uid: 0}.open()
			if err == nil {
				closeLogged(f)
			}
			if got := err == nil; got != tt.ok {
				t.Errorf("Find's open: got ok=%v (%v), want ok=%v", got, err, tt.ok)
			}
		})
	}
	t.Run("missing dirs are made 0755", func(t *testing.T) {
		dir := filepath.Join(baseDir(t), "x", "y")
		if out, err := exec.Command("bash", "build.sh", "--check-cache", dir).CombinedOutput(); err != nil {
			t.Fatalf("build.sh --check-cache: %v: %s", err, out)
		}
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
			t.Fatalf("made cache: got %v, %v, want a 0755 directory", fi, err)
		}
	})
	t.Run("relative path", func(t *testing.T) {
		out, err := exec.Command("bash", "build.sh", "--check-cache", "cache").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "not an absolute path") {
			t.Fatalf("build.sh --check-cache cache: got %v: %s, want an absolute-path error", err, out)
		}
	})
}

// baseDir is a root-owned 0755 directory for one case (t.TempDir's
// parent is 0700 but root's; /tmp above it is sticky).
func baseDir(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	return base
}

// mkdirs makes base/parent/name with the given modes (chmod, past the
// umask) and returns its path.
func mkdirs(t *testing.T, base, parent string, pmode os.FileMode, name string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(base, parent)
	mkdir(t, p, 0o755)
	mkdir(t, filepath.Join(p, name), 0o755)
	chmod(t, filepath.Join(p, name), mode)
	chmod(t, p, pmode)
	return filepath.Join(p, name)
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, p string, uid int) {
	t.Helper()
	if err := os.Chown(p, uid, -1); err != nil {
		t.Fatal(err)
	}
}

// TestBuildScriptPrune: build.sh's prune (run alone, out of the script)
// keeps the newest three kernels and this build's, and leaves no renamed
// leftovers.
func TestBuildScriptPrune(t *testing.T) {
	tests := []struct{ dest, want string }{
		{"kernel-5", "kernel-3 kernel-4 kernel-5"},
		{"kernel-1", "kernel-1 kernel-3 kernel-4 kernel-5"},
	}
	for _, tt := range tests {
		dir := baseDir(t)
		for i := 1; i <= 5; i++ {
			p := filepath.Join(dir, fmt.Sprintf("kernel-%d", i))
			mkdir(t, p, 0o755)
			at := time.Date(2026, 12, 1, i, 0, 0, 0, time.UTC)
			if err := os.Chtimes(p, at, at); err != nil {
				t.Fatal(err)
			}
		}
		script := `eval "$(sed -n '/^prune() {$/,/^}$/p' build.sh)"; cache=$1 dest=$1/$2 keep=3; prune`
		if out, err := exec.Command("bash", "-euo", "pipefail", "-c", script, "bash", dir, tt.dest).CombinedOutput(); err != nil {
			t.Fatalf("prune: %v: %s", err, out)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("prune with dest %s: got %q, want %s", tt.dest, got, tt.want)
		}
	}
}
