package workspace

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestPlantedSymlinks plants what hostile code would (judge0
// CVE-2024-28185) and checks that no operation reaches through a link.
func TestPlantedSymlinks(t *testing.T) {
	forEachIdentity(t, Limits{}, func(t *testing.T, e *env) {
		target := newDecoy(t, filepath.Join(e.out, "target"), 0o666)
		symlink(t, "/etc/shadow", filepath.Join(e.ws, "shadow"))
		symlink(t, target.path, filepath.Join(e.ws, "evil"))
		symlink(t, e.out, filepath.Join(e.ws, "d"))
		symlink(t, "../outside", filepath.Join(e.ws, "up"))
		symlink(t, "/proc/self/root/etc", filepath.Join(e.ws, "magic"))
		if err := os.Mkdir(filepath.Join(e.ws, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		symlink(t, "..", filepath.Join(e.ws, "sub/parent"))
		e.give(t)

		for _, p := range []string{"shadow", "evil", "d/target", "up/target", "magic/shadow", "sub/parent/evil", "/workspace/d/target"} {
			got, _, err := readAll(t, e.d, p)
			wantErr(t, "Read("+p+")", err, ErrLink)
			if len(got) != 0 {
				t.Errorf("Read(%s) returned %q through a link", p, got)
			}
			if err != nil && !strings.Contains(err.Error(), "symbolic link") {
				t.Errorf("Read(%s) error %q does not name the symbolic link", p, err)
			}
		}
		for _, p := range []string{"d/x", "d/new/x", "up/x", "magic/x", "sub/parent/d/x"} {
			_, err := e.d.Write(p, strings.NewReader("pwned"), 0)
			wantErr(t, "Write("+p+")", err, ErrLink)
			_, err = e.d.Mkdir(p)
			wantErr(t, "Mkdir("+p+")", err, ErrLink)
			err = e.d.Remove(p, true)
			wantErr(t, "Remove("+p+")", err, ErrLink)
		}
		_, err := e.d.List("d")
		wantErr(t, "List(d)", err, ErrLink)

		// Writing over a link replaces the link, never its target.
		if _, err := e.d.Write("evil", strings.NewReader("pwned"), 0); err != nil {
			t.Fatalf("Write(evil) over a symlink: %v", err)
		}
		if ent, err := e.d.Stat("evil"); err != nil || ent.Type != TypeFile {
			t.Errorf("after Write(evil): Stat = %+v, %v; want a regular file", ent, err)
		}
		// Removing a link removes the link.
		if err := e.d.Remove("d", true); err != nil {
			t.Errorf("Remove(d), a symlink: %v", err)
		}
		target.check(t)
		checkNames(t, e.out, "target")
	})
}

// TestPlantedHardLink: a second name of a root-only file outside the
// workspace (judge0 CVE-2024-28189) is never read.
func TestPlantedHardLink(t *testing.T) {
	forEachIdentity(t, Limits{}, func(t *testing.T, e *env) {
		testhost.RequireRoot(t)
		// Same file system as the workspace (both in os.TempDir()), in a
		// root-only directory.
		private := t.TempDir()
		secret := newDecoy(t, filepath.Join(private, "secret"), 0o600)
		if err := os.Link(secret.path, filepath.Join(e.ws, "hl")); err != nil {
			t.Skipf("cannot hard link across %s and %s: %v", private, e.ws, err)
		}
		got, _, err := readAll(t, e.d, "hl")
		wantErr(t, "Read(hl)", err, ErrHardLink)
		if len(got) != 0 {
			t.Errorf("Read(hl) returned %q", got)
		}
		if err != nil && !strings.Contains(err.Error(), "hard link") {
			t.Errorf("Read(hl) error %q does not say hard link", err)
		}
		// Writing replaces the name; the other name keeps its content.
		if _, err := e.d.Write("hl", strings.NewReader("pwned"), 0); err != nil {
			t.Errorf("Write(hl): %v", err)
		}
		secret.check(t)
	})
}

// TestSpecialFiles: FIFOs and device nodes are refused without being
// opened, so nothing blocks.
func TestSpecialFiles(t *testing.T) {
	forEachIdentity(t, Limits{}, func(t *testing.T, e *env) {
		if err := unix.Mkfifo(filepath.Join(e.ws, "fifo"), 0o666); err != nil {
			t.Fatal(err)
		}
		specials := []string{"fifo"}
		if os.Geteuid() == 0 {
			if err := unix.Mknod(filepath.Join(e.ws, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
				t.Fatal(err)
			}
			specials = append(specials, "null")
		}
		e.give(t)
		for _, p := range specials {
			done := make(chan error, 1)
			go func() {
				_, _, err := e.d.Read(p)
				done <- err
			}()
			select {
			case err := <-done:
				wantErr(t, "Read("+p+")", err, ErrNotRegular)
			case <-time.After(5 * time.Second):
				t.Fatalf("Read(%s) still blocked after 5s", p)
			}
			ent, err := e.d.Stat(p)
			if err != nil || ent.Type != TypeOther {
				t.Errorf("Stat(%s) = %+v, %v; want type %q", p, ent, err, TypeOther)
			}
		}
		// Writing over a FIFO replaces it without opening it.
		done := make(chan error, 1)
		go func() {
			_, err := e.d.Write("fifo", strings.NewReader("x"), 0)
			done <- err
		}()
		select {
		case err := <-done:
			wantErr(t, "Write(fifo)", err, nil)
		case <-time.After(5 * time.Second):
			t.Fatal("Write(fifo) still blocked after 5s")
		}
	})
}

// TestRenameRace swaps a directory and a symbolic link to a directory
// outside the workspace at the same name, as fast as it can, while the
// host writes, reads, lists and removes through that name: whatever the
// interleaving, nothing outside is read, created or changed.
func TestRenameRace(t *testing.T) {
	forEachIdentity(t, Limits{}, func(t *testing.T, e *env) {
		target := newDecoy(t, filepath.Join(e.out, "secret"), 0o666)
		dir := filepath.Join(e.ws, "d")
		link := filepath.Join(e.ws, "link")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "secret"), "inside", 0o644)
		symlink(t, e.out, link)
		e.give(t)

		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
					t.Errorf("swapping: %v", err)
					return
				}
			}
		})
		allowed := []error{nil, ErrLink, ErrNotFound}
		check := func(what string, err error) {
			for _, ok := range allowed {
				if ok == nil && err == nil || ok != nil && errors.Is(err, ok) {
					return
				}
			}
			t.Errorf("%s under the race: %v", what, err)
		}
		counts := map[string]int{}
		for i := range 500 {
			_, err := e.d.Write("d/new", strings.NewReader("x"), 0)
			check("Write(d/new)", err)
			counts["write ok"] += b2i(err == nil)
			got, _, err := readAll(t, e.d, "d/secret")
			check("Read(d/secret)", err)
			if err == nil && !bytes.Equal(got, []byte("inside")) {
				t.Fatalf("Read(d/secret) = %q, want %q: it read outside the workspace", got, "inside")
			}
			counts["read ok"] += b2i(err == nil)
			_, err = e.d.List("d")
			check("List(d)", err)
			_, err = e.d.Mkdir("d/sub")
			check("Mkdir(d/sub)", err)
			if i%10 == 0 {
				check("Remove(d/new)", e.d.Remove("d/new", true))
			}
		}
		close(stop)
		wg.Wait()
		t.Logf("succeeded through the real directory: %v of 500 each", counts)
		target.check(t)
		checkNames(t, e.out, "secret")
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
