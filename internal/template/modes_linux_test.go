package template

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// modesLayer sets a directory read-only before writing into it again, as
// a layer may: a/ 0755, a/f, a/ 0555, a/g; and locked/ 0000 (kept 0500,
// see safeMode) before locked/x.
func modesLayer(t testing.TB) []byte {
	return layerTar(t, dir("a"), file("a/f", "f"), entry{name: "a", typ: '5', mode: 0o555}, file("a/g", "g"),
		entry{name: "locked", typ: '5', mode: 0}, file("locked/x", "x"))
}

// TestDirModesAppliedLast unpacks and flattens modesLayer as an
// unprivileged user (the CLI supports a store not run as root), in a
// copy of this test binary: both finish, the directories end with the
// layer's modes, and removeTree (GC, undo) still removes everything.
func TestDirModesAppliedLast(t *testing.T) {
	if os.Getuid() != 0 {
		runModes(t, t.TempDir())
		return
	}
	if testing.Short() {
		t.Skip("copies the test binary to run it as uid 65534")
	}
	work, err := os.MkdirTemp("", "warden-modes-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(work); err != nil {
			t.Logf("removing %s: %v", work, err)
		}
	})
	exe := filepath.Join(work, "template.test")
	data := filepath.Join(work, "data")
	for _, step := range []func() error{
		func() error { return copyExe(exe) },
		func() error { return os.Mkdir(data, 0o700) },
		func() error { return os.Chown(data, 65534, 65534) },
		func() error { return os.Chmod(work, 0o755) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(exe, "-test.run=^TestDirModesAppliedLast$", "-test.v")
	cmd.Env = append(os.Environ(), "WARDEN_MODES_DIR="+data)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS")) {
		t.Fatalf("as uid 65534: %v\n%s", err, out)
	}
}

// copyExe copies this test binary to p, 0755, for another user to run.
func copyExe(p string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func init() {
	if d := os.Getenv("WARDEN_MODES_DIR"); d != "" && os.Getuid() != 0 {
		modesDir = d
	}
}

// modesDir is where the unprivileged copy works (set only in it).
var modesDir string

// runModes unpacks, flattens and removes modesLayer under top.
func runModes(t *testing.T, top string) {
	if modesDir != "" {
		top = modesDir
	}
	layer, flat := filepath.Join(top, "layer"), filepath.Join(top, "flat")
	for _, d := range []string{layer, flat} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b := budget{bytes: 1 << 20, entries: 100}
	if err := unpackLayer(bytes.NewReader(modesLayer(t)), layer, "sha256:test", &b, func(string, ...any) {}); err != nil {
		t.Fatalf("unpacking: %v", err)
	}
	if err := flatten(context.Background(), flat, []string{layer}); err != nil {
		t.Fatalf("flattening: %v", err)
	}
	for _, root := range []string{layer, flat} {
		for p, want := range map[string]os.FileMode{"a": 0o555, "locked": 0o500} {
			fi, err := os.Lstat(filepath.Join(root, p))
			if err != nil || fi.Mode().Perm() != want {
				t.Errorf("%s/%s: got %v, %v; want mode %v", root, p, fi.Mode(), err, want)
			}
		}
		if err := removeTree(root); err != nil {
			t.Errorf("removing %s: %v", root, err)
		}
	}
}
