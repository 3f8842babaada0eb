package native

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/fontcache"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// useTestFonts makes this process's sandboxes take font lists from a
// store of the test's own holding f as the host root's list.
func useTestFonts(t *testing.T, f fontcache.File) {
	testhost.RequireRoot(t)
	if !IdmapsTmpfs() {
		testhost.SkipOrFail(t, "the kernel cannot idmap tmpfs (6.3 or later), which font list builds take")
	}
	key, err := fontcache.RootKey("/")
	if err != nil {
		t.Fatal(err)
	}
	if key.None {
		testhost.SkipOrFail(t, "the host has no matplotlib (apt-get install python3-matplotlib)")
	}
	s := fontcache.Store{Dir: filepath.Join(t.TempDir(), "fonts")}
	if err := s.Save(key, f); err != nil {
		t.Fatal(err)
	}
	UseFontCache(s)
	t.Cleanup(func() { fontStore.Store(nil) })
}

// runSh runs script in a fresh sandbox and returns its stdout.
func runSh(t *testing.T, script string) string {
	t.Helper()
	s := spec.Spec{Command: []string{"sh", "-c", script}, Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}
	var out, errOut bytes.Buffer
	r, err := Run(context.Background(), s, IO{Stdout: &out, Stderr: &errOut})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("sh -c %q: exit %d, %v: %s", script, r.ExitCode, err, errOut.String())
	}
	return out.String()
}

// TestFontListInHome: a sandbox's fresh HOME holds the root's font list,
// owned by the sandbox user and writable by it, and what one sandbox
// writes there no other sees.
func TestFontListInHome(t *testing.T) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	mark := hex.EncodeToString(b[:])
	list := `{"_version": 330, "mark": "` + mark + `"}`
	useTestFonts(t, fontcache.File{Name: "fontlist-v330.json", Data: []byte(list)})
	const path = "$HOME/.cache/matplotlib/fontlist-v330.json"
	got := runSh(t, `stat -c '%u %g %a' `+path+` && cat `+path+` && echo && echo changed > `+path+` && cat `+path)
	if want := "1000 1000 644\n" + list + "\nchanged\n"; got != want {
		t.Errorf("first sandbox saw\n%s\nwant\n%s", got, want)
	}
	if got := runSh(t, `cat `+path); got != list {
		t.Errorf("second sandbox's list = %q, want the store's %q: a change in one sandbox reached another", got, list)
	}
}

// TestFontListNone: the "no list" answer puts nothing in HOME.
func TestFontListNone(t *testing.T) {
	useTestFonts(t, fontcache.File{})
	if got := runSh(t, `ls -A "$HOME"`); strings.TrimSpace(got) != "" {
		t.Errorf("HOME holds %q, want nothing", got)
	}
}

// TestFontListBuild: the build sandbox leaves matplotlib's list of the
// host's root, which reads back whole; the scratch it used is gone.
func TestFontListBuild(t *testing.T) {
	useTestFonts(t, fontcache.File{})
	dir := t.TempDir()
	f, err := fontList(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(f.Name, "fontlist-v") || !bytes.Contains(f.Data, []byte(`"ttflist"`)) {
		t.Errorf("built list %q of %d bytes, want matplotlib's font list", f.Name, len(f.Data))
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("the build left %q", left)
	}
}
