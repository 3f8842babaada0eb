package native

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/fontcache"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// reportBuilder is the test builder's main: it does what FontBuilderMain
// does first, then writes to path its directory, mount namespace and
// what each of its descriptors is, one "fd target" a line, and exits.
func reportBuilder(path string) {
	err := closeStrayFDs()
	var b strings.Builder
	cwd, _ := os.Getwd()
	ns, _ := os.Readlink("/proc/self/ns/mnt")
	fmt.Fprintf(&b, "cwd %s\nns %s\n", cwd, ns)
	names, _ := filepath.Glob("/proc/self/fd/*")
	for _, n := range names {
		target, _ := os.Readlink(n)
		fmt.Fprintf(&b, "fd%s %s\n", filepath.Base(n), target)
	}
	if err == nil {
		err = os.WriteFile(path, []byte(b.String()), 0o600)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestFontBuilderTakesNothing: the detached builder, started while its
// caller holds a descriptor open across exec (a shell's `9>lock`), holds
// none of it, nor its caller's directory or stdio, and mounts in a
// namespace of its own: only the store's lock, as fd 3.
func TestFontBuilderTakesNothing(t *testing.T) {
	testhost.RequireRoot(t)
	dir := t.TempDir()
	s := fontcache.Store{Dir: filepath.Join(dir, "fonts")}
	lock, held, err := s.TryLock()
	if err != nil || !held {
		t.Fatalf("TryLock: held %t, %v", held, err)
	}
	defer lock.Close()
	stray, err := os.Create(filepath.Join(dir, "stray"))
	if err != nil {
		t.Fatal(err)
	}
	defer stray.Close()
	if _, err := unix.FcntlInt(stray.Fd(), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report")
	cmd := builderCmd(s, lock)
	cmd.Env = append(cmd.Env, "WARDEN_TEST_BUILDER_REPORT="+report)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
	defer stop()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the builder: %v", err)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	ourNS, _ := os.Readlink("/proc/self/ns/mnt")
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch {
		case k == "ns" && v == ourNS:
			t.Errorf("the builder shares our mount namespace %s", v)
		case k == "ns":
		case v == stray.Name():
			t.Errorf("the builder holds its caller's stray descriptor: %s", line)
		case v == "" || strings.HasPrefix(v, "/proc/") || strings.HasPrefix(v, "/sys/fs/cgroup/") || strings.HasPrefix(v, "anon_inode:"):
			// its own (the listing, the runtime's cgroup reads): close-on-exec
		default:
			got = append(got, line)
		}
	}
	want := []string{"cwd /", "fd0 /dev/null", "fd1 /dev/null", "fd2 /dev/null", "fd3 " + filepath.Join(s.Dir, ".lock")}
	if !slices.Equal(got, want) {
		t.Errorf("the builder holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSweepBuilds: what builders killed midway left (a mounted scratch,
// an empty one, a bare build directory) is removed; what cannot be is
// named, and other names are left alone.
func TestSweepBuilds(t *testing.T) {
	testhost.RequireRoot(t)
	dir := t.TempDir()
	mounted := filepath.Join(dir, "build-1", "scratch")
	if err := rootfs.MountScratch(mounted, 1<<20, 64, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mounted, unix.MNT_DETACH) })
	for _, d := range []string{"build-2/scratch", "build-3", "build-4/other", "keep"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	err := sweepBuilds(dir)
	if err == nil || !strings.Contains(err.Error(), "build-4") {
		t.Errorf("sweepBuilds = %v, want it to name build-4, which holds more than a scratch", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	for i := range left {
		left[i] = filepath.Base(left[i])
	}
	if want := []string{"build-4", "keep"}; !slices.Equal(left, want) {
		t.Errorf("left %q, want %q", left, want)
	}
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), mounted) {
		t.Errorf("%s is still mounted", mounted)
	}
}

// TestBuildResult: only a clean build that left no list is the "no
// list" answer; a failed one, or a refused list, is an error (not saved).
func TestBuildResult(t *testing.T) {
	empty := t.TempDir()
	link := t.TempDir()
	if err := os.MkdirAll(filepath.Join(link, fontcache.Dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(link, fontcache.Dir, "fontlist-v330.json")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		r      spec.Result
		home   string
		wantOK bool
	}{
		{"clean, no list", spec.Result{}, empty, true},
		{"exit 1", spec.Result{ExitCode: 1}, empty, false},
		{"timed out", spec.Result{ExitCode: 137, TimedOut: true}, empty, false},
		{"out of memory", spec.Result{OOMKilled: true}, empty, false},
		{"signal", spec.Result{Signal: "SIGKILL"}, empty, false},
		{"a link for a list", spec.Result{}, link, false},
	} {
		f, err := buildResult(c.r, c.home)
		if got := err == nil; got != c.wantOK || !f.None() {
			t.Errorf("%s: buildResult = %q, %v; want ok %t and no list", c.name, f.Name, err, c.wantOK)
		}
	}
}
