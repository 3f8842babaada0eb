package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/warden-sandbox/warden/internal/boxname"
)

// TestSubdirs: the sweep's listing gives a directory's subdirectories and
// nothing else, reads no directory that holds none, and says when the
// directory is missing, as os.ReadDir did.
func TestSubdirs(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		dirs  []string
	}{
		{"empty", nil, nil},
		{"control files only", []string{"cgroup.procs", "tasks"}, nil},
		{"boxes", []string{"tasks"}, []string{"41-a", "42-b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range tt.dirs {
				if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			got, err := subdirs(dir)
			slices.Sort(got)
			if err != nil || !slices.Equal(got, tt.dirs) {
				t.Errorf("subdirs = %q, %v; want %q, nil", got, err, tt.dirs)
			}
		})
	}
	if _, err := subdirs(filepath.Join(t.TempDir(), "gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("subdirs of a missing directory: %v, want ErrNotExist", err)
	}
}

// TestLiveStaleAsksOncePerOwner: the sweep lists the same stale boxes in
// every hierarchy, and asks whether an owner is dead once, not once per
// hierarchy.
func TestLiveStaleAsksOncePerOwner(t *testing.T) {
	f := newStaleFixture(t)
	asked := map[int]int{}
	stale, err := Stale(func(pid int) bool { asked[pid]++; return boxname.Dead(pid) })
	if err != nil {
		t.Fatalf("Stale: %v", err)
	}
	for _, c := range []Cgroup{f.stale, f.busy} {
		for _, d := range dirsOf(c) {
			if !slices.Contains(stale, d) {
				t.Errorf("Stale = %q, missing %s", stale, d)
			}
		}
	}
	for pid, n := range asked {
		if n != 1 {
			t.Errorf("dead(%d) asked %d times, want once", pid, n)
		}
	}
}

// TestLiveRemoveStalePartial: a dead Warden's box left in one hierarchy
// only (its other directories removed, as by a Delete cut short) is
// still found and removed.
func TestLiveRemoveStalePartial(t *testing.T) {
	f := newStaleFixture(t)
	dirs := dirsOf(f.stale)
	for _, d := range dirs[:len(dirs)-1] {
		if err := os.Remove(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveStale(boxname.Dead); err != nil {
		t.Fatalf("RemoveStale: %v", err)
	}
	f.check(t, f.stale)
}

// TestLiveRemoveStaleRechecksOwner: an owner judged dead while listing
// but alive when its cgroup is about to go (its pid reused meanwhile)
// keeps its cgroups: dead is asked again right before each removal.
func TestLiveRemoveStaleRechecksOwner(t *testing.T) {
	f := newStaleFixture(t)
	asked := map[int]int{}
	deadOnce := func(pid int) bool { asked[pid]++; return asked[pid] == 1 && boxname.Dead(pid) }
	if err := RemoveStale(deadOnce); err != nil {
		t.Fatalf("RemoveStale: %v", err)
	}
	f.check(t) // nothing gone
}
