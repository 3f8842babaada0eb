package docker

import (
	"bytes"
	"os"
	"testing"
)

// TestGoBuildIDOfCutFiles reads the build ID of this test binary cut
// short at many lengths, and of files that are not ELF: each gives the
// whole ID or "", never a part of it or a panic.
func TestGoBuildIDOfCutFiles(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	whole := goBuildID(bytes.NewReader(bin))
	if whole == "" {
		t.Fatalf("goBuildID(%s) is empty, want this test binary's build ID", self)
	}
	for _, n := range []int{0, 3, 4, 63, 64, 65, 120, 200, 400, 1000, 4000, 4096, 8192} {
		if got := goBuildID(bytes.NewReader(bin[:min(n, len(bin))])); got != "" && got != whole {
			t.Errorf("goBuildID of the first %d bytes = %q, want %q or nothing", n, got, whole)
		}
	}
	for _, s := range []string{"", "init a", "\x7fELF", "\x7fELF\x02\x01" + string(make([]byte, 100))} {
		if got := goBuildID(bytes.NewReader([]byte(s))); got != "" {
			t.Errorf("goBuildID(%q) = %q, want nothing", s, got)
		}
	}
}
