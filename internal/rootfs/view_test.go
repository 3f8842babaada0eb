package rootfs

import (
	"strings"
	"testing"
)

func TestViewCPUs(t *testing.T) {
	for _, c := range []struct {
		cpus float64
		want int
	}{
		{1, 1}, {0.1, 1}, {1.5, 2}, {8, 8}, {0, 0}, {-1, 0},
	} {
		if got := ViewCPUs(c.cpus); got != c.want {
			t.Errorf("ViewCPUs(%g) = %d, want %d", c.cpus, got, c.want)
		}
	}
}

func TestClampCPUs(t *testing.T) {
	for _, c := range []struct{ want, have, got int }{
		{0, 16, 16}, {2, 16, 2}, {8, 2, 2}, {1, 0, 1}, {0, 0, 1},
	} {
		if got := ClampCPUs(c.want, c.have); got != c.got {
			t.Errorf("ClampCPUs(%d, %d) = %d, want %d", c.want, c.have, got, c.got)
		}
	}
}

const hostCPUInfo = "processor\t: 0\nmodel name\t: X\nsiblings\t: 4\ncpu cores\t: 4\n\n" +
	"processor\t: 1\nmodel name\t: X\nsiblings\t: 4\ncpu cores\t: 4\n\n" +
	"processor\t: 2\nmodel name\t: X\nsiblings\t: 4\ncpu cores\t: 4\n\n"

const hostCgroups = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t1\t12\t1\nmemory\t4\t80\t1\n"

func TestProcFilesShowTheView(t *testing.T) {
	files := ProcFiles(ViewSource{View: View{MemoryBytes: 256 << 20, CPUs: 2}, HostCPUInfo: []byte(hostCPUInfo),
		HostCgroups: []byte(hostCgroups), BootID: "id", BootTime: 42})
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
		{"cgroups", "#subsys_name\thierarchy\tnum_cgroups\tenabled\n", 1},
		{"cgroups", "cpu\t1\t1\t1\n", 1},
		{"cgroups", "\t12\t", 0},
		{"sys/fs/file-nr", "0\t0\t", 1},
		{"sys/fs/file-max", nominalFileMax, 1},
	} {
		if got := strings.Count(files[c.file], c.want); got != c.count {
			t.Errorf("%s has %q %d times, want %d:\n%s", c.file, c.want, got, c.count, files[c.file])
		}
	}
	if len(files) != len(ProcView) {
		t.Errorf("ProcFiles made %d files, want one per ProcView entry (%d): a name is listed twice", len(files), len(ProcView))
	}
}

func TestMeminfoWithoutLimitShowsTheHost(t *testing.T) {
	host := []byte("MemTotal:       24683548 kB\nMemFree:         1000 kB\n")
	for _, c := range []struct {
		limit int64
		host  []byte
		want  string
	}{
		{0, host, "MemTotal:       24683548 kB\n"},
		{256 << 20, host, "MemTotal:         262144 kB\n"},
		{0, []byte("garbage"), "MemTotal:              0 kB\n"},
	} {
		if got := Meminfo(c.limit, c.host); !strings.HasPrefix(got, c.want) {
			t.Errorf("Meminfo(%d, %q) starts %q, want %q", c.limit, c.host, got[:min(len(got), 30)], c.want)
		}
	}
}

func TestCPURange(t *testing.T) {
	for n, want := range map[int]string{1: "0\n", 2: "0-1\n", 16: "0-15\n"} {
		if got := CPURange(n); got != want {
			t.Errorf("CPURange(%d) = %q, want %q", n, got, want)
		}
	}
}
