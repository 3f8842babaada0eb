package vmbox

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLostName: a boot is retried only when the initramfs it bound lost
// its name, which an open file shows by a link count of 0.
func TestLostName(t *testing.T) {
	p := filepath.Join(t.TempDir(), "initrd")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if lostName(f) {
		t.Errorf("lostName of a named file = true, want false")
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if !lostName(f) {
		t.Errorf("lostName after its name was removed = false, want true")
	}
}
