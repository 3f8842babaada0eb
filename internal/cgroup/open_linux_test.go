package cgroup

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/boxname"
)

// TestLiveOpenFreezer: a cgroup opened by name freezes and thaws the
// processes New's cgroup of that name holds, and lists them.
func TestLiveOpenFreezer(t *testing.T) {
	c, cmd := busyCgroup(t)
	z, err := OpenFreezer(filepath.Base(c.Path()))
	if err != nil {
		t.Fatalf("OpenFreezer: %v", err)
	}
	if pids, err := z.Procs(); err != nil || !slices.Contains(pids, cmd.Process.Pid) {
		t.Fatalf("Procs() = %v, %v; want the busy loop's pid %d", pids, err, cmd.Process.Pid)
	}
	if err := z.Freeze(freezeWait); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	frozen := cpu(t, c)
	time.Sleep(200 * time.Millisecond) // a spinning loop would use all of it
	if after := cpu(t, c); after != frozen {
		t.Errorf("a cgroup frozen through OpenFreezer used %v of CPU, want none", after-frozen)
	}
	if err := z.Thaw(); err != nil {
		t.Fatalf("Thaw: %v", err)
	}
	if !waitFor(30*time.Second, func() bool { return cpu(t, c) > frozen }) {
		t.Error("the thawed loop never ran again")
	}
}

// TestOpenFreezerRefuses: a name no cgroup has is fs.ErrNotExist (the
// caller falls back), and a name that is not this process's is refused.
func TestOpenFreezerRefuses(t *testing.T) {
	requireCgroups(t)
	for _, tt := range []struct {
		name, want string
		notExist   bool
	}{
		{name: boxname.New(), notExist: true},
		{name: "1-abc", want: "this process's pid"},
		{name: "../x", want: "one path element"},
	} {
		_, err := OpenFreezer(tt.name)
		switch {
		case tt.notExist && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errors.ErrUnsupported):
			t.Errorf("OpenFreezer(%q) = %v, want fs.ErrNotExist (or ErrUnsupported without a freezer)", tt.name, err)
		case !tt.notExist && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("OpenFreezer(%q) = %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
}
