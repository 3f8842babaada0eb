package scratch

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestMeasureSeed logs what Seed costs a session's start (WARDEN_MEASURE=1):
// a template with no home or /workspace (every pulled image), and one a
// commit made with 10 and 1000 small files, median of 20 runs each.
func TestMeasureSeed(t *testing.T) {
	if os.Getenv("WARDEN_MEASURE") == "" {
		t.Skip("set WARDEN_MEASURE=1 to measure")
	}
	for _, n := range []int{0, 10, 1000} {
		root := t.TempDir()
		files := map[string]string{"usr/bin/x": "x"}
		for i := range n {
			files[fmt.Sprintf("home/sandbox/d%d/f%d", i%10, i)] = "some data\n"
		}
		write(t, root, files)
		var times []time.Duration
		for range 20 {
			dir := t.TempDir()
			write(t, dir, map[string]string{"home/": "", "workspace/": ""})
			start := time.Now()
			if err := Seed(dir, root, Kept); err != nil {
				t.Fatal(err)
			}
			times = append(times, time.Since(start))
			if err := os.RemoveAll(filepath.Join(dir, "home")); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("seed of %d files: median %v", n, median(times))
	}
}

func median(d []time.Duration) time.Duration {
	for i := range d {
		for j := i + 1; j < len(d); j++ {
			if d[j] < d[i] {
				d[i], d[j] = d[j], d[i]
			}
		}
	}
	return d[len(d)/2]
}
