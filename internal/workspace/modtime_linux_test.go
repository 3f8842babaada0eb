package workspace

import (
	"encoding/json"
	"math"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzModTime checks that whatever time a sandbox gives its files, the
// Entry's ModTime stays in the years JSON and RFC 3339 carry, so a
// listing always encodes.
func FuzzModTime(f *testing.F) {
	for _, s := range [][2]int64{{0, 0}, {-1, 999999999}, {math.MaxInt64, 0}, {math.MinInt64, 0}, {253402300800, 0}, {-62167219201, 5}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		mt := modTime(unix.Timespec{Sec: sec, Nsec: nsec})
		if mt.Before(minModTime) || mt.After(maxModTime) {
			t.Errorf("modTime(%d, %d) = %v, outside %v-%v", sec, nsec, mt, minModTime, maxModTime)
		}
		if _, err := json.Marshal(mt); err != nil {
			t.Errorf("modTime(%d, %d) = %v, which does not encode: %v", sec, nsec, mt, err)
		}
	})
}
