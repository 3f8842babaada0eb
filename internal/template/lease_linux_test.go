//go:build linux && !slim

package template

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestLeaseBlocksRemove: Remove refuses a leased template (a lease taken
// by another open of the store, as another process's would be) until
// every lease is released, and a removed template cannot be leased.
func TestLeaseBlocksRemove(t *testing.T) {
	s := openStore(t, Options{})
	importBase(t, s, "base")
	other, err := Open(s.Dir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tpl, release1, err := s.Lease("base")
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	if tpl.Root != filepath.Join(s.Dir(), "templates", "base", "rootfs") {
		t.Errorf("Lease root = %q, want the template's rootfs", tpl.Root)
	}
	_, release2, err := other.Lease("base")
	if err != nil {
		t.Fatalf("a second Lease: %v, want leases to share", err)
	}
	for i, release := range []func(){release1, release2} {
		err := other.Remove("base")
		if err == nil || !strings.Contains(err.Error(), "in use") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("Remove with %d leases: got %v, want a one-line refusal saying it is in use", 2-i, err)
		}
		release()
	}
	if err := other.Remove("base"); err != nil {
		t.Fatalf("Remove after the leases ended: %v", err)
	}
	if _, _, err := s.Lease("base"); err == nil || !strings.Contains(err.Error(), `no template "base"`) {
		t.Errorf("Lease of a removed template: got %v, want no template", err)
	}
}

// TestLeaseDuringRemoval: a template being removed cannot be leased.
func TestLeaseDuringRemoval(t *testing.T) {
	s := openStore(t, Options{})
	importBase(t, s, "base")
	held, err := s.holdForRemoval("base")
	if err != nil {
		t.Fatal(err)
	}
	defer held()
	if _, _, err := s.Lease("base"); err == nil || !strings.Contains(err.Error(), "being removed") {
		t.Errorf("Lease during removal: got %v, want it refused as being removed", err)
	}
}
