package plan

import (
	"slices"
	"testing"
)

func TestNarrowBeyond1024CPUs(t *testing.T) {
	allowed := []int{3, 1500, 2047}
	for _, c := range []struct {
		cpu, want int
		got       []int
	}{
		{1500, 2, []int{1500, 2047}},
		{2047, 2, []int{3, 2047}},
		{-1, 1, []int{3}},
		{7, 5, []int{3, 1500, 2047}},
	} {
		mask := narrow(allowed, c.cpu, c.want, 32)
		if got := cpusIn(mask); !slices.Equal(got, c.got) {
			t.Errorf("narrow(%v, from %d, %d) = CPUs %v, want %v", allowed, c.cpu, c.want, got, c.got)
		}
	}
}

func TestAffinityReadsThisThread(t *testing.T) {
	mask, err := affinity()
	if err != nil || len(cpusIn(mask)) == 0 {
		t.Fatalf("affinity() = %v, %v; want at least one CPU", mask, err)
	}
}
