package nsinit

import (
	"os"
	"reflect"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// testAnswerer is an answerer over the host's /proc, as the init's is
// over the sandbox's, with usage read from a file holding usageText ("":
// no usage file).
func testAnswerer(t *testing.T, total uint64, usageText string) *answerer {
	t.Helper()
	a := &answerer{procfd: -1, usage: -1, total: total}
	if err := a.openProc(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(a.procfd) })
	if usageText != "" {
		p := t.TempDir() + "/memory.usage_in_bytes"
		if err := os.WriteFile(p, []byte(usageText), 0o600); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		a.usage = fd
	}
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &a.start); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAnswererWritable: the answerer writes a caller's struct only where
// the caller's maps say every byte of it is writable memory; read-only
// code and unmapped addresses are refused.
func TestAnswererWritable(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a := testAnswerer(t, 1<<30, "")
	buf := make([]byte, sysinfoSize)
	heap := uint64(uintptr(unsafe.Pointer(&buf[0])))
	code := uint64(reflect.ValueOf(TestAnswererWritable).Pointer())
	tid := uint32(unix.Gettid())
	tests := []struct {
		name string
		addr uint64
		want bool
	}{
		{"heap", heap, true},
		{"code", code, false},
		{"unmapped", 0x1000, false},
		{"past the address space", ^uint64(0) - sysinfoSize, false},
	}
	for _, tt := range tests {
		if got := a.writable(tid, tt.addr, sysinfoSize); got != tt.want {
			t.Errorf("%s: writable(%#x) = %v, want %v", tt.name, tt.addr, got, tt.want)
		}
	}
	if a.writable(1<<31, heap, sysinfoSize) {
		t.Errorf("writable() of a thread that does not exist = true")
	}
	runtime.KeepAlive(buf)
}

// TestAnswererFigures: the figures are the box's: its memory limit, what
// its cgroup leaves free of it (never below zero), at least one process.
func TestAnswererFigures(t *testing.T) {
	tests := []struct {
		name     string
		total    uint64
		usage    string
		wantFree uint64
	}{
		{"no usage file", 1 << 30, "", 1 << 30},
		{"usage read", 1 << 30, "1048576\n", 1<<30 - 1<<20},
		{"usage past the limit", 1 << 20, "4194304\n", 0},
		{"unreadable usage", 1 << 20, "garbage\n", 1 << 20},
	}
	for _, tt := range tests {
		a := testAnswerer(t, tt.total, tt.usage)
		got := a.figures()
		if got.TotalRAM != tt.total || got.FreeRAM != tt.wantFree || got.Procs < 1 || got.UptimeSeconds < 0 {
			t.Errorf("%s: figures() = %+v, want total %d, free %d, at least 1 process", tt.name, got, tt.total, tt.wantFree)
		}
	}
	noProc := &answerer{procfd: -1, usage: -1}
	if n := noProc.countProcs(); n != 1 {
		t.Errorf("countProcs() without /proc = %d, want 1 (the init)", n)
	}
}
