package spec

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestCeilingsCheck: each limit at its ceiling passes; above it, or
// asking for no limit at all, is refused with the limit, the value, the
// ceiling and the flag named.
func TestCeilingsCheck(t *testing.T) {
	c := Ceilings{
		Timeout: time.Minute, MemoryBytes: GiB, DiskBytes: 2 * GiB, CPUs: 2, Pids: 4096, OpenFiles: 65536,
		OutputBytes: 16 * MiB, FileSizeBytes: GiB, CPUTime: time.Hour,
	}
	tests := []struct {
		name string
		set  func(*Limits)
		want string
	}{
		{"defaults", func(*Limits) {}, ""},
		{"all at the ceiling", func(l *Limits) { *l = Limits(c) }, ""},
		{"timeout", func(l *Limits) { l.Timeout = 24 * time.Hour },
			"timeout 24h0m0s is above this server's ceiling of 1m0s (set by --max-timeout): ask for at most 1m0s"},
		{"no timeout", func(l *Limits) { l.Timeout = 0 },
			"timeout 0 (no limit) is above this server's ceiling of 1m0s (set by --max-timeout)"},
		{"memory", func(l *Limits) { l.MemoryBytes = 64 * GiB },
			"memory 64GiB is above this server's ceiling of 1GiB (set by --max-memory): ask for at most 1GiB"},
		{"no memory limit", func(l *Limits) { l.MemoryBytes = 0 }, "memory 0 (no limit) is above"},
		{"disk", func(l *Limits) { l.DiskBytes = 64 * GiB },
			"disk 64GiB is above this server's ceiling of 2GiB (set by --max-disk)"},
		{"cpus", func(l *Limits) { l.CPUs = 1024 },
			"cpus 1024 is above this server's ceiling of 2 (set by --max-cpus): ask for at most 2"},
		{"cpus a little over", func(l *Limits) { l.CPUs = 2.5 }, "cpus 2.5 is above"},
		{"pids", func(l *Limits) { l.Pids = 1 << 20 },
			"pids 1048576 is above this server's ceiling of 4096 (set by --max-pids)"},
		{"open files", func(l *Limits) { l.OpenFiles = 1 << 20 },
			"open files 1048576 is above this server's ceiling of 65536 (set by --max-open-files)"},
		{"output", func(l *Limits) { l.OutputBytes = GiB },
			"output 1GiB is above this server's ceiling of 16MiB (set by --max-output)"},
		{"file size", func(l *Limits) { l.FileSizeBytes = 2 * GiB },
			"file size 2GiB is above this server's ceiling of 1GiB (set by --max-file-size)"},
		{"cpu time", func(l *Limits) { l.CPUTime = 24 * time.Hour },
			"cpu time 24h0m0s is above this server's ceiling of 1h0m0s (set by --max-cpu-time)"},
	}
	for _, tt := range tests {
		l := DefaultLimits
		tt.set(&l)
		err := c.Check(l)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: Check() = %v, want nil", tt.name, err)
		case tt.want != "" && (err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: Check() = %v, want ErrInvalid containing %q", tt.name, err, tt.want)
		case err != nil && strings.Contains(err.Error(), "\n"):
			t.Errorf("%s: Check() = %q, want one line", tt.name, err)
		}
	}
}

// TestNoCeilings: a zero Ceilings bounds nothing, "no limit" included.
func TestNoCeilings(t *testing.T) {
	var c Ceilings
	if err := c.Check(Limits{DiskBytes: MinDiskBytes}); err != nil {
		t.Errorf("Check() with no ceilings = %v", err)
	}
	if err := c.CheckTimeout(MaxTimeout); err != nil {
		t.Errorf("CheckTimeout() with no ceilings = %v", err)
	}
}

func TestCheckTimeout(t *testing.T) {
	c := Ceilings{Timeout: time.Minute}
	if err := c.CheckTimeout(0); err != nil {
		t.Errorf("CheckTimeout(0), the session's own, = %v", err)
	}
	if err := c.CheckTimeout(time.Minute); err != nil {
		t.Errorf("CheckTimeout(1m) = %v", err)
	}
	if err := c.CheckTimeout(time.Hour); err == nil || !strings.Contains(err.Error(), "--max-timeout") {
		t.Errorf("CheckTimeout(1h) = %v, want a refusal naming --max-timeout", err)
	}
}

// TestCeilingFieldsCoverLimits: every field of Limits has a ceiling,
// each with its own flag, so a new limit cannot slip past the check. The
// fields are found by reflection, not listed by hand.
func TestCeilingFieldsCoverLimits(t *testing.T) {
	seen := map[uintptr]bool{}
	flags := map[string]bool{}
	var l Limits
	base := reflect.ValueOf(&l).Pointer()
	for _, f := range CeilingFields {
		seen[reflect.ValueOf(f.Field(&l)).Pointer()-base] = true
		if flags[f.Flag] || !strings.HasPrefix(f.Flag, "max-") {
			t.Errorf("ceiling %s: flag %q is repeated or not max-...", f.Name, f.Flag)
		}
		flags[f.Flag] = true
	}
	typ := reflect.TypeOf(l)
	for i := range typ.NumField() {
		if fld := typ.Field(i); !seen[fld.Offset] {
			t.Errorf("Limits.%s has no ceiling in CeilingFields", fld.Name)
		}
	}
}

// TestClamp: limits above their ceilings, "no limit" included, are
// lowered to them and reported; the others are kept.
func TestClamp(t *testing.T) {
	c := Ceilings{Timeout: 30 * time.Second, MemoryBytes: 256 * MiB, CPUs: 0.5}
	l := DefaultLimits
	l.OpenFiles = 0
	got, clamped := c.Clamp(l)
	want := DefaultLimits
	want.Timeout, want.MemoryBytes, want.CPUs, want.OpenFiles = 30*time.Second, 256*MiB, 0.5, 0
	if got != want {
		t.Errorf("Clamp() = %+v, want %+v", got, want)
	}
	var names []string
	for _, e := range clamped {
		names = append(names, e.Field.Name+" "+e.Value+"->"+e.Ceiling)
	}
	if g, w := strings.Join(names, ", "), "timeout 1m0s->30s, memory 512MiB->256MiB, cpus 1->0.5"; g != w {
		t.Errorf("Clamp() lowered %q, want %q", g, w)
	}
	if err := c.Check(got); err != nil {
		t.Errorf("Check(Clamp()) = %v, want nil", err)
	}
}

// TestCeilingsValidate: negative, NaN and infinite ceilings, and a
// timeout ceiling under a second, are refused naming the flag.
func TestCeilingsValidate(t *testing.T) {
	tests := []struct {
		c    Ceilings
		want string
	}{
		{Ceilings{}, ""},
		{Ceilings(DefaultLimits), ""},
		{Ceilings{Pids: -5}, "--max-pids -5 is not a ceiling: use a positive value, or 0 for no ceiling"},
		{Ceilings{CPUs: -1}, "--max-cpus -1 is not a ceiling"},
		{Ceilings{CPUs: math.NaN()}, "--max-cpus NaN is not a ceiling"},
		{Ceilings{CPUs: math.Inf(1)}, "--max-cpus +Inf is not a ceiling"},
		{Ceilings{MemoryBytes: -1}, "--max-memory"},
		{Ceilings{CPUTime: -time.Second}, "--max-cpu-time -1s is not a ceiling"},
		{Ceilings{Timeout: 500 * time.Millisecond}, "--max-timeout 500ms is too short: requests ask for whole seconds, so use at least 1s"},
	}
	for _, tt := range tests {
		err := tt.c.Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.c, err, tt.want)
		}
	}
}
