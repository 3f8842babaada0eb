package nsinit

import (
	"encoding/binary"
	"math"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestSysinfoLayout holds encodeSysinfo's offsets to x/sys's struct
// sysinfo, which cgo generated from the kernel's header.
func TestSysinfoLayout(t *testing.T) {
	var si unix.Sysinfo_t
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"size", sysinfoSize, unsafe.Sizeof(si)},
		{"uptime", siUptime, unsafe.Offsetof(si.Uptime)},
		{"totalram", siTotalram, unsafe.Offsetof(si.Totalram)},
		{"freeram", siFreeram, unsafe.Offsetof(si.Freeram)},
		{"procs", siProcs, unsafe.Offsetof(si.Procs)},
		{"mem_unit", siMemUnit, unsafe.Offsetof(si.Unit)},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, c.got, c.want)
		}
	}
}

// decodeSysinfo reads b as the kernel's struct would be read.
func decodeSysinfo(b *[sysinfoSize]byte) unix.Sysinfo_t {
	var si unix.Sysinfo_t
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&si)), sysinfoSize), b[:])
	return si
}

func TestEncodeSysinfo(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name string
		in   sysinfoFigures
		want unix.Sysinfo_t
	}{
		{"a 256 MiB box", sysinfoFigures{UptimeSeconds: 3, TotalRAM: 256 * mib, FreeRAM: 200 * mib, Procs: 4},
			unix.Sysinfo_t{Uptime: 3, Totalram: 256 * mib, Freeram: 200 * mib, Procs: 4, Unit: 1}},
		{"free above the total is the total", sysinfoFigures{TotalRAM: mib, FreeRAM: 2 * mib, Procs: 1},
			unix.Sysinfo_t{Totalram: mib, Freeram: mib, Procs: 1, Unit: 1}},
		{"procs past 65535 and a negative uptime are clamped", sysinfoFigures{UptimeSeconds: -5, TotalRAM: mib, Procs: 1 << 20},
			unix.Sysinfo_t{Totalram: mib, Procs: math.MaxUint16, Unit: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b [sysinfoSize]byte
			for i := range b {
				b[i] = 0xAA // what was there before must not show through
			}
			encodeSysinfo(&b, tt.in)
			if got := decodeSysinfo(&b); got != tt.want {
				t.Errorf("encodeSysinfo(%+v) = %+v, want %+v", tt.in, got, tt.want)
			}
			if pad := binary.LittleEndian.Uint32(b[siProcs+2:]); pad != 0 {
				t.Errorf("padding after procs = %#x, want 0", pad)
			}
		})
	}
}
