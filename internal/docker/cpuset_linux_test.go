package docker

import (
	"slices"
	"sync/atomic"
	"testing"
)

// TestPlace: boxes take turns over Warden's CPUs, so a server's boxes
// spread over the host rather than sharing the CPU its thread runs on.
func TestPlace(t *testing.T) {
	for _, c := range []struct {
		name    string
		allowed []int
		want    int
		got     [][]int
	}{
		{"one each over four", []int{0, 1, 2, 3}, 1, [][]int{{0}, {1}, {2}, {3}, {0}}},
		{"two each over three", []int{2, 5, 7}, 2, [][]int{{2, 5}, {7, 2}, {5, 7}}},
		{"no quota takes all", []int{0, 1}, 0, [][]int{{0, 1}, {0, 1}}},
		{"more than there are takes all", []int{0, 1}, 3, [][]int{{0, 1}}},
	} {
		var next atomic.Uint64
		for i, want := range c.got {
			if got := place(c.allowed, c.want, &next); !slices.Equal(got, want) {
				t.Errorf("%s: box %d got %v; want %v", c.name, i, got, want)
			}
		}
	}
}

// TestBoxCPUsSpread: successive one-CPU boxes land on every CPU Warden
// may use equally often.
func TestBoxCPUsSpread(t *testing.T) {
	all, err := boxCPUs(0)
	if err != nil {
		t.Fatal(err)
	}
	uses := map[int]int{}
	for range 4 * len(all) {
		cpus, err := boxCPUs(1)
		if err != nil || len(cpus) != 1 || !slices.Contains(all, cpus[0]) {
			t.Fatalf("boxCPUs(1) = %v, %v; want one of %v", cpus, err, all)
		}
		uses[cpus[0]]++
	}
	for _, c := range all {
		if uses[c] != 4 && len(all) > 1 {
			t.Errorf("CPU %d got %d of %d boxes; want 4 (uses %v)", c, uses[c], 4*len(all), uses)
		}
	}
}
