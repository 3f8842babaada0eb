package spec

import (
	"strings"
	"testing"
	"time"
)

// FuzzParseSize checks that any input either fails with a one-line error
// or yields a non-negative whole size that FormatSize prints back to the
// same number of bytes.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"256MiB", "1.5G", "64m", "0", "1048576", "0.5", "1e30", " 2 KiB ", "-1", "NaN", "Inf", "0x10", ".", "1..2K"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("ParseSize(%q) error has several lines: %q", s, err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d, want a size of at least 0", s, n)
		}
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Errorf("ParseSize(FormatSize(%d) = %q) = %d, %v; want %d", n, FormatSize(n), back, err, n)
		}
	})
}

// FuzzParseDuration checks that any input either fails with a one-line
// error or yields a duration of at least zero.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"10s", "1m30s", "0", "5", "-1s", "1h", "999999999h", "1.5ms", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("ParseDuration(%q) error has several lines: %q", s, err)
			}
			return
		}
		if d < 0 {
			t.Errorf("ParseDuration(%q) = %v, want no negative duration", s, d)
		}
	})
}

// FuzzLimitsValidate checks that validation never panics and that what it
// accepts stays within the bounds it documents.
func FuzzLimitsValidate(f *testing.F) {
	f.Add(int64(60e9), int64(512<<20), int64(256), 1.0, int64(256<<20))
	f.Add(int64(-1), int64(-1), int64(-1), -1.0, int64(-1))
	f.Fuzz(func(t *testing.T, timeout, mem, pids int64, cpus float64, disk int64) {
		l := DefaultLimits
		l.Timeout, l.MemoryBytes, l.Pids, l.CPUs, l.DiskBytes = time.Duration(timeout), mem, pids, cpus, disk
		if err := l.Validate(); err != nil {
			return
		}
		if l.Timeout < 0 || l.Timeout > MaxTimeout || l.MemoryBytes < 0 || l.Pids < 0 || l.Pids > MaxPids ||
			l.CPUs < 0 || l.CPUs > MaxCPUs || l.DiskBytes < 0 {
			t.Errorf("Validate accepted %+v", l)
		}
	})
}
