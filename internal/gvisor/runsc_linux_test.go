package gvisor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// TestFindRunscRefusesReplaceable checks that FindRunsc takes a runsc
// only root or warden's user can replace, and runs it where its links
// lead, so that a link in a directory anyone may write is no way in.
func TestFindRunscRefusesReplaceable(t *testing.T) {
	base := t.TempDir()
	bin := filepath.Join(base, "runsc")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := FindRunsc(bin); got != bin || err != nil {
		t.Fatalf("FindRunsc(%s) = %q, %v, want it trusted", bin, got, err)
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(open, "runsc")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	if got, err := FindRunsc(link); got != bin || err != nil {
		t.Errorf("FindRunsc(%s) = %q, %v, want %s, where it leads", link, got, err, bin)
	}
	if err := os.Chmod(bin, 0o775); err != nil {
		t.Fatal(err)
	}
	if _, err := FindRunsc(bin); !errors.Is(err, nsinit.ErrUntrusted) {
		t.Errorf("FindRunsc(%s) of mode 0775 = %v, want ErrUntrusted", bin, err)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := FindRunsc(bin); !errors.Is(err, nsinit.ErrUntrusted) {
		t.Errorf("FindRunsc(%s) in a directory of mode 0777 = %v, want ErrUntrusted", bin, err)
	}
	if err := os.Chmod(base, 0o700); err != nil {
		t.Fatal(err)
	}
	// A directory further up that others may write: they could rename
	// the runsc's directory away after the check, unless it is sticky.
	up := filepath.Join(base, "up")
	deep := filepath.Join(up, "sub", "runsc")
	if err := os.MkdirAll(filepath.Dir(deep), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(deep, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		mode    os.FileMode
		trusted bool
	}{{0o777, false}, {0o777 | os.ModeSticky, true}, {0o755, true}} {
		if err := os.Chmod(up, tt.mode); err != nil {
			t.Fatal(err)
		}
		if _, err := FindRunsc(deep); (err == nil) != tt.trusted || err != nil && !errors.Is(err, nsinit.ErrUntrusted) {
			t.Errorf("FindRunsc(%s) under a directory of mode %v = %v, want trusted %v", deep, tt.mode, err, tt.trusted)
		}
	}
	if _, err := FindRunsc(filepath.Join(base, "missing")); err == nil || !strings.Contains(err.Error(), "make runsc") {
		t.Errorf("FindRunsc(missing) = %v, want the fix named", err)
	}
}
