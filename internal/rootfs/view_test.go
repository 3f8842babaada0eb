package rootfs

import (
	"strings"
	"testing"
)

func TestViewCPUs(t *testing.T) {
	for _, c := range []struct {
		cpus float64
		host int
		want int
	}{
		{1, 64, 1}, {0.1, 64, 1}, {1.5, 64, 2}, {8, 2, 2}, {0, 16, 16}, {2, 0, 1},
	} {
		if got := ViewCPUs(c.cpus, c.host); got != c.want {
			t.Errorf("ViewCPUs(%g, %d) = %d, want %d", c.cpus, c.host, got, c.want)
		}
	}
}

const hostCPUInfo = "processor\t: 0\nmodel name\t: X\nsiblings\t: 4\ncpu cores\t: 4\n\n" +
	"processor\t: 1\nmodel name\t: X\nsiblings\t: 4\ncpu cores\t: 4\n\n" +
	"processor\t: 2\nmodel name\t: X\nsiblings\t: 4\ncpu cores\t: 4\n\n"

func TestProcFilesShowTheView(t *testing.T) {
	files := ProcFiles(View{MemoryBytes: 256 << 20, CPUs: 2}, []byte(hostCPUInfo), "id", 42)
	for _, c := range []struct {
		file, want string
		count      int
	}{
		{"meminfo", "MemTotal:         262144 kB\n", 1},
		{"meminfo", "SwapTotal:             0 kB\n", 1},
		{"cpuinfo", "processor\t: ", 2},
		{"cpuinfo", "siblings\t: 2\n", 2},
		{"cpuinfo", "model name\t: X\n", 2},
		{"stat", "\ncpu1 ", 1},
		{"stat", "\ncpu2 ", 0},
		{"stat", "btime 42\n", 1},
		{"softirqs", "CPU1", 1},
		{"sys/kernel/random/boot_id", "id\n", 1},
	} {
		if got := strings.Count(files[c.file], c.want); got != c.count {
			t.Errorf("%s has %q %d times, want %d:\n%s", c.file, c.want, got, c.count, files[c.file])
		}
	}
	for _, name := range ProcView {
		if _, ok := files[name]; !ok {
			t.Errorf("ProcFiles has no %s", name)
		}
	}
}

func TestMeminfoWithoutLimitHidesTheHost(t *testing.T) {
	if got, want := Meminfo(0), Meminfo(nominalMemory); got != want {
		t.Errorf("Meminfo(0) = %q, want the nominal %q", got, want)
	}
}

func TestCPURange(t *testing.T) {
	for n, want := range map[int]string{1: "0\n", 2: "0-1\n", 16: "0-15\n"} {
		if got := CPURange(n); got != want {
			t.Errorf("CPURange(%d) = %q, want %q", n, got, want)
		}
	}
}
