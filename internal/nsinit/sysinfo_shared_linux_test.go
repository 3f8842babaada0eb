package nsinit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSysinfoFiguresShared: the answerer computes the memory figures of
// internal/plan/testdata/sysinfo_figures.json, the table that
// warden-exec's answer is checked against too (internal/plan's
// TestExecutorSysinfo), so the two executors' boxes say the same.
func TestSysinfoFiguresShared(t *testing.T) {
	b, err := os.ReadFile("../plan/testdata/sysinfo_figures.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name        string
		Usage       *string
		Total, Free uint64
		Host        bool
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatalf("reading sysinfo_figures.json: %v", err)
	}
	for _, c := range cases {
		if c.Host {
			continue // prepare reads the host's total from the kernel
		}
		t.Run(c.Name, func(t *testing.T) {
			a := &answerer{total: c.Total, usage: -1, procfd: -1}
			if c.Usage != nil {
				p := filepath.Join(t.TempDir(), "memory.usage_in_bytes")
				if err := os.WriteFile(p, []byte(*c.Usage), 0o644); err != nil {
					t.Fatal(err)
				}
				fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer unix.Close(fd)
				a.usage = fd
			}
			if f := a.figures(); f.TotalRAM != c.Total || f.FreeRAM != c.Free {
				t.Errorf("total %d free %d, want %d %d", f.TotalRAM, f.FreeRAM, c.Total, c.Free)
			}
		})
	}
}
