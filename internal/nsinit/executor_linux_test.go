package nsinit

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/plan"
)

// TestExecutor: warden-exec is found beside this executable only when it
// is there, trusted and of this build, and otherwise the error says what
// to do. It calls findExecutor, as Executor keeps its first answer.
func TestExecutor(t *testing.T) {
	findInit()
	p := filepath.Join(filepath.Dir(self), ExecName)
	if _, err := os.Stat(p); err == nil {
		t.Skipf("%s exists beside the test binary", p)
	}
	_, _, err := findExecutor()
	if err == nil || !strings.Contains(err.Error(), "run make build") {
		t.Fatalf("Executor() without warden-exec: %v, want a not-found error saying run make build", err)
	}
	if err := os.WriteFile(p, elfWith(versionNote(plan.Version)), 0o755); err != nil {
		t.Skipf("cannot write beside the test binary: %v", err)
	}
	defer os.Remove(p)
	got, fd, err := findExecutor()
	if err != nil || got != p || fd < ExecFDMin {
		t.Fatalf("Executor() = %q, fd %d, %v; want %q, fd >= %d", got, fd, err, p, ExecFDMin)
	}
	checkKeptInode(t, p, fd)
	other := elfWith(versionNote(plan.Version))
	binary.LittleEndian.PutUint16(other[18:], machine()+1)
	if err := os.WriteFile(p, other, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := findExecutor(); !strings.Contains(err.Error(), "not an executable for this machine") {
		t.Errorf("Executor() of another machine's warden-exec: %v, want it refused as not executable here", err)
	}
	if err := os.Chmod(p, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, _, err := findExecutor(); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("Executor() of a world-writable warden-exec: %v, want ErrUntrusted naming why", err)
	}
}

// checkKeptInode: the descriptor findExecutor keeps (fd) is the file
// checked at p, and stays that file when another is put at p: runs
// execute what was checked.
func checkKeptInode(t *testing.T, p string, fd int) {
	t.Helper()
	defer func() {
		if err := unix.Close(fd); err != nil {
			t.Errorf("closing the kept descriptor: %v", err)
		}
	}()
	var kept, was unix.Stat_t
	if err := unix.Stat(p, &was); err != nil {
		t.Fatal(err)
	}
	tmp := p + ".new"
	if err := os.WriteFile(tmp, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(fd, &kept); err != nil {
		t.Fatal(err)
	}
	if kept.Ino != was.Ino || kept.Dev != was.Dev {
		t.Errorf("kept descriptor %d is inode %d, want the checked %d", fd, kept.Ino, was.Ino)
	}
}

// TestExecutorNoexec: a warden-exec on a noexec mount, which the kernel
// would not execute, is refused with a line saying so.
func TestExecutorNoexec(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOEXEC, "mode=0755"); err != nil {
		t.Skipf("mounting a noexec tmpfs: %v (needs root)", err)
	}
	defer func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting: %v", err)
		}
	}()
	p := filepath.Join(dir, ExecName)
	if err := os.WriteFile(p, elfWith(versionNote(plan.Version)), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := OpenTrusted(p)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLogged(f, "closing the test's warden-exec")
	if err := checkExecMount(f, p); err == nil || !strings.Contains(err.Error(), "noexec mount") {
		t.Errorf("checkExecMount on a noexec mount: %v, want it refused naming noexec", err)
	}
}
