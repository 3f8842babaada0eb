package nsinit

import (
	"encoding/binary"
	"testing"
)

// dirent is one getdents64 record named name, padded to 8 bytes.
func dirent(name string) []byte {
	size := (19 + len(name) + 1 + 7) &^ 7
	b := make([]byte, size)
	binary.LittleEndian.PutUint16(b[16:], uint16(size))
	copy(b[19:], name)
	return b
}

func TestCountPids(t *testing.T) {
	join := func(names ...string) []byte {
		var b []byte
		for _, n := range names {
			b = append(b, dirent(n)...)
		}
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want int
	}{
		{"empty", nil, 0},
		{"pids among other entries", join(".", "..", "1", "self", "42", "thread-self", "sys", "1000"), 3},
		{"a record claiming more than the buffer ends the count", append(join("1", "2"), 0xff, 0xff), 2},
		{"a record too short to hold a name ends the count", func() []byte {
			b := join("7", "8")
			binary.LittleEndian.PutUint16(b[16:], 19)
			return b
		}(), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := countPids(tt.in); got != tt.want {
				t.Errorf("countPids = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestParseUsage(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"4096\n", 4096},
		{"123", 123},
		{"0\n", 0},
		{"", 0},
		{"\n", 0},
		{"-1\n", 0},
		{"12 34\n", 0},
		{"9999999999999999999\n", 9999999999999999999},
		{"99999999999999999999\n", 0}, // past 19 digits: would overflow
	}
	for _, tt := range tests {
		if got := parseUsage([]byte(tt.in)); got != tt.want {
			t.Errorf("parseUsage(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestParseMapsLine(t *testing.T) {
	tests := []struct {
		line         string
		lo, hi       uint64
		writable, ok bool
	}{
		{"7f0000001000-7f0000002000 rw-p 00000000 00:00 0 ", 0x7f0000001000, 0x7f0000002000, true, true},
		{"55d4c0a00000-55d4c0a21000 r--p 00000000 08:01 12 /usr/bin/python3", 0x55d4c0a00000, 0x55d4c0a21000, false, true},
		{"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]", 0xffffffffff600000, 0xffffffffff601000, false, true},
		{"7f0000002000-7f0000001000 rw-p 0 0 0", 0, 0, false, false},
		{"10000000000000000-1 rw-p", 0, 0, false, false},
		{"garbage", 0, 0, false, false},
		{"1000-2000", 0, 0, false, false},
	}
	for _, tt := range tests {
		lo, hi, w, ok := parseMapsLine([]byte(tt.line))
		if lo != tt.lo || hi != tt.hi || w != tt.writable || ok != tt.ok {
			t.Errorf("parseMapsLine(%q) = %#x, %#x, %v, %v, want %#x, %#x, %v, %v", tt.line, lo, hi, w, ok, tt.lo, tt.hi, tt.writable, tt.ok)
		}
	}
}
