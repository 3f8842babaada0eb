package nsinit

import (
	"encoding/binary"
	"math"
)

// sysinfoSize is sizeof(struct sysinfo) on x86_64, the only ABI the
// seccomp filter lets a sandbox call: what the kernel writes, and so what
// the init writes in its place.
const sysinfoSize = 112

// Offsets of struct sysinfo's fields on x86_64 (include/uapi/linux/sysinfo.h:
// long uptime, unsigned long loads[3], totalram, freeram, sharedram,
// bufferram, totalswap, freeswap, unsigned short procs, unsigned long
// totalhigh, freehigh, unsigned int mem_unit); a test holds them to
// unix.Sysinfo_t.
const (
	siUptime   = 0
	siTotalram = 32
	siFreeram  = 40
	siProcs    = 80
	siMemUnit  = 104
)

// sysinfoFigures are what a sandbox's sysinfo(2) says of its own world,
// in place of the host's: its memory limit and what is free of it, its
// own uptime and its own processes. Everything else (loads, shared and
// buffer memory, swap, high memory) is zero: a sandbox has no swap, and
// /proc/loadavg in its view says 0.
type sysinfoFigures struct {
	// UptimeSeconds is how long the box has run.
	UptimeSeconds int64
	// TotalRAM is the box's memory limit in bytes; FreeRAM what is left
	// of it.
	TotalRAM, FreeRAM uint64
	// Procs counts the processes of the box's PID namespace.
	Procs int
}

// encodeSysinfo lays f out as the kernel's struct sysinfo in dst, with
// mem_unit 1 (every figure in bytes). Fields it does not set are zero,
// padding included, so nothing of the init's memory reaches the sandbox.
func encodeSysinfo(dst *[sysinfoSize]byte, f sysinfoFigures) {
	*dst = [sysinfoSize]byte{}
	le := binary.LittleEndian
	le.PutUint64(dst[siUptime:], uint64(max(f.UptimeSeconds, 0)))
	le.PutUint64(dst[siTotalram:], f.TotalRAM)
	le.PutUint64(dst[siFreeram:], min(f.FreeRAM, f.TotalRAM))
	le.PutUint16(dst[siProcs:], uint16(min(max(f.Procs, 0), math.MaxUint16)))
	le.PutUint32(dst[siMemUnit:], 1)
}

// countPids counts the entries of a getdents64 listing whose names are
// process ids (they start with 1 to 9). Each record is a u64 inode, a u64
// offset, a u16 record length, a u8 type, then the name; a record too
// short or too long for the buffer ends the count.
func countPids(b []byte) int {
	const nameAt = 19
	n := 0
	for len(b) > nameAt {
		reclen := int(binary.LittleEndian.Uint16(b[16:]))
		if reclen <= nameAt || reclen > len(b) {
			break
		}
		if c := b[nameAt]; c >= '1' && c <= '9' {
			n++
		}
		b = b[reclen:]
	}
	return n
}

// parseUsage reads a cgroup's memory usage file: a decimal byte count
// and a newline. Anything else reads as 0, so free memory is then the
// whole limit, as the view's /proc/meminfo says.
func parseUsage(b []byte) uint64 {
	var n uint64
	digits := 0
	for _, c := range b {
		if c == '\n' && digits > 0 {
			return n
		}
		if c < '0' || c > '9' || digits == 19 {
			return 0
		}
		n = n*10 + uint64(c-'0')
		digits++
	}
	if digits == 0 {
		return 0
	}
	return n
}

// parseMapsLine reads the range and whether it is writable from one line
// of /proc/PID/maps ("start-end perms ..."), which the kernel writes; ok
// is false for a line of another form.
func parseMapsLine(line []byte) (lo, hi uint64, writable, ok bool) {
	lo, rest, ok1 := parseHex(line)
	if !ok1 || len(rest) == 0 || rest[0] != '-' {
		return 0, 0, false, false
	}
	hi, rest, ok1 = parseHex(rest[1:])
	if !ok1 || len(rest) < 5 || rest[0] != ' ' || hi < lo {
		return 0, 0, false, false
	}
	return lo, hi, rest[2] == 'w', true
}

// parseHex reads a lower-case hexadecimal number of at most 16 digits at
// the start of b and returns it with the rest of b.
func parseHex(b []byte) (uint64, []byte, bool) {
	var n uint64
	i := 0
	for ; i < len(b) && i < 17; i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | uint64(c-'a'+10)
		default:
			return n, b[i:], i > 0
		}
	}
	return n, b[i:], i > 0 && i <= 16
}
