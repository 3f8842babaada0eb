package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Binary size units.
const (
	KiB int64 = 1 << 10
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
	TiB int64 = 1 << 40
)

var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": KiB, "kib": KiB, "kb": 1000,
	"m": MiB, "mib": MiB, "mb": 1000 * 1000,
	"g": GiB, "gib": GiB, "gb": 1000 * 1000 * 1000,
	"t": TiB, "tib": TiB, "tb": 1000 * 1000 * 1000 * 1000,
}

// ParseSize reads a byte count such as "256MiB", "1.5G", "64m" or "1048576".
// KiB/MiB/GiB and the bare K/M/G are binary (as in Docker), KB/MB/GB decimal.
// "0" means no limit where a limit allows it.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("size %q is not a size: write a number with an optional unit, e.g. 256MiB, 1GiB or 512K", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q is not a size: write a number with an optional unit, e.g. 256MiB", s)
	}
	v := f * float64(mult)
	switch {
	case v >= math.MaxInt64/2:
		return 0, fmt.Errorf("size %q is too large", s)
	case v != math.Trunc(v) || (v == 0 && f != 0):
		// "0.5" with no unit is a typo for 0.5GiB far more often than
		// half a byte; rounding it to 0 would mean "no limit".
		return 0, fmt.Errorf("size %q is not a whole number of bytes: add a unit, e.g. %sGiB", s, num)
	}
	return int64(v), nil
}

// FormatSize prints n in the largest binary unit that keeps it exact enough
// to read, so messages echo what the user is likely to have typed.
func FormatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}} {
		if n >= u.size && n%(u.size/16) == 0 {
			return strconv.FormatFloat(float64(n)/float64(u.size), 'f', -1, 64) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// ParseDuration reads a Go duration ("10s", "1m30s", "500ms"). A bare number
// is refused rather than guessed, because seconds and milliseconds are both
// plausible and a wrong guess silently changes a kill deadline.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		if _, nerr := strconv.ParseFloat(t, 64); nerr == nil {
			return 0, fmt.Errorf("duration %q has no unit: write e.g. %ss or %sms", s, t, t)
		}
		return 0, fmt.Errorf("duration %q is not a duration: write e.g. 10s, 1m30s or 500ms", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return d, nil
}
