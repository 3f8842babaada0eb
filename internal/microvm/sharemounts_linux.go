package microvm

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// hostMountinfo is the host's mount table as warden sees it.
const hostMountinfo = "/proc/self/mountinfo"

// hostMount is one line of mountinfo: where a mount is and what it is.
type hostMount struct {
	point, fstype string
}

// readMounts reads and parses hostMountinfo.
func readMounts() ([]hostMount, error) {
	b, err := os.ReadFile(hostMountinfo)
	if err != nil {
		return nil, fmt.Errorf("microvm: reading the host's mounts to check the shares: %w", err)
	}
	ms, err := parseMountinfo(string(b))
	if err != nil {
		return nil, fmt.Errorf("microvm: parsing %s: %w", hostMountinfo, err)
	}
	return ms, nil
}

// parseMountinfo parses mountinfo (proc(5)) strictly: every line has its
// six fixed fields, optional fields ended by "-", then the filesystem type
// and source, and an absolute, correctly escaped mount point.
func parseMountinfo(s string) ([]hostMount, error) {
	var ms []hostMount
	for i, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		f := strings.Split(line, " ")
		sep := -1
		for j := 6; j < len(f); j++ {
			if f[j] == "-" {
				sep = j
				break
			}
		}
		if len(f) < 10 || sep < 0 || len(f) != sep+4 {
			return nil, fmt.Errorf("line %d is not a mountinfo line: %.200q", i+1, line)
		}
		point, err := unescapeMount(f[4])
		if err != nil || !strings.HasPrefix(point, "/") || f[sep+1] == "" {
			return nil, fmt.Errorf("line %d has a bad mount point or type: %.200q", i+1, line)
		}
		ms = append(ms, hostMount{point: point, fstype: f[sep+1]})
	}
	return ms, nil
}

// unescapeMount undoes the kernel's octal escapes (\040 for a space, and
// tab, newline and backslash alike) in a mountinfo path.
func unescapeMount(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("a cut escape in %q", s)
		}
		c, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("a bad escape in %q", s)
		}
		b.WriteByte(byte(c))
		i += 3
	}
	return b.String(), nil
}

// checkShareMounts refuses a share with a mount of one of kernelFS at or
// under its directory: the share is copied with the mounts under it
// (AT_RECURSIVE), so a procfs mounted inside it would hand the host's
// processes to QEMU's root.
func checkShareMounts(dir string, ms []hostMount) error {
	for _, m := range ms {
		if _, ok := kernelFS[m.fstype]; !ok {
			continue
		}
		if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
			return fmt.Errorf("microvm: share %s holds a mount of %s at %s, the host kernel's interface; unmount it or share another directory", dir, m.fstype, m.point)
		}
	}
	return nil
}
