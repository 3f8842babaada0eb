package snapshot

import "testing"

func TestLow(t *testing.T) {
	for _, tc := range []struct {
		free, total uint64
		want        bool
	}{
		{0, 0, false},
		{0, 100, true},
		{4, 100, true},
		{5, 100, false},
		{49, 1000, true},
		{50, 1000, false},
		{1 << 40, 1 << 41, false},
	} {
		if got := low(tc.free, tc.total); got != tc.want {
			t.Errorf("low(%d, %d) = %v; want %v", tc.free, tc.total, got, tc.want)
		}
	}
}

func TestCharge(t *testing.T) {
	for _, tc := range []struct {
		st   Stats
		want int64
	}{
		{Stats{}, 0},
		{Stats{Dirs: 2000}, 2000 * EntryCost},
		{Stats{Files: 1, Bytes: 10}, 10 + EntryCost},
		{Stats{Files: 1, Bytes: 10, Skipped: 5}, 10 + EntryCost},
	} {
		if got := tc.st.Charge(); got != tc.want {
			t.Errorf("%+v.Charge() = %d; want %d", tc.st, got, tc.want)
		}
	}
}
