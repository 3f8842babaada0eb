package cgroup

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseKeyed(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]uint64
	}{
		{"empty", "", map[string]uint64{}},
		{"v2 memory.events", "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n",
			map[string]uint64{"low": 0, "high": 0, "max": 12, "oom": 3, "oom_kill": 2, "oom_group_kill": 0}},
		{"skips malformed lines", "a 1\nnovalue\nb notanumber\nc -1\n\nd 4 extra\ne 5",
			map[string]uint64{"a": 1, "e": 5}},
		{"trailing spaces", "a 7 \n", map[string]uint64{"a": 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseKeyed(strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("parseKeyed: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseKeyed(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseOOMControl(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want oomControl
	}{
		{"fresh", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n", oomControl{}},
		{"killed twice", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n", oomControl{Kills: 2}},
		{"killer disabled and stuck", "oom_kill_disable 1\nunder_oom 1\noom_kill 0\n", oomControl{KillDisable: true}},
		{"kernel before 4.13 has no oom_kill", "oom_kill_disable 0\nunder_oom 0\n", oomControl{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseOOMControl(strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("parseOOMControl: %v", err)
			}
			if got != tt.want {
				t.Errorf("parseOOMControl(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseMemoryEvents(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n", 0},
		{"low 0\nhigh 0\nmax 40\noom 1\noom_kill 1\noom_group_kill 0\n", 1},
		{"", 0},
	}
	for _, tt := range tests {
		got, err := parseMemoryEvents(strings.NewReader(tt.in))
		if err != nil || got != tt.want {
			t.Errorf("parseMemoryEvents(%q) = %d, %v; want %d, nil", tt.in, got, err, tt.want)
		}
	}
}

func TestParseCPUStat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"v2", "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n", 1500 * time.Microsecond, false},
		{"zero", "usage_usec 0\n", 0, false},
		{"huge saturates", "usage_usec 18446744073709551615\n", math.MaxInt64, false},
		{"v1 cpu.stat has no usage", "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCPUStat(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseCPUStat = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseSingle(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{"67108864\n", 67108864, false},
		{"0", 0, false},
		{"max\n", math.MaxUint64, false},
		{"9223372036854771712\n", 9223372036854771712, false},
		{"-1\n", 0, true},
		{"", 0, true},
		{"12 34\n", 0, true},
	}
	for _, tt := range tests {
		got, err := parseSingle(strings.NewReader(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseSingle(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParsePids(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"", nil, false},
		{"1\n", []int{1}, false},
		{"100\n200\n\n300\n", []int{100, 200, 300}, false},
		{"12\nx\n", nil, true},
		{"0\n", nil, true},
	}
	for _, tt := range tests {
		got, err := parsePids(strings.NewReader(tt.in))
		if (err != nil) != tt.wantErr {
			t.Errorf("parsePids(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parsePids(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestParseControllers(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]bool
	}{
		{"", map[string]bool{}},
		{"\n", map[string]bool{}},
		{"cpuset cpu io memory hugetlb pids rdma misc\n", map[string]bool{
			"cpuset": true, "cpu": true, "io": true, "memory": true, "hugetlb": true, "pids": true, "rdma": true, "misc": true}},
		{"memory pids", map[string]bool{"memory": true, "pids": true}},
	}
	for _, tt := range tests {
		got, err := parseControllers(strings.NewReader(tt.in))
		if err != nil {
			t.Fatalf("parseControllers: %v", err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseControllers(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestParseProcCgroup(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    procCgroup
		wantErr bool
	}{
		{
			name: "hybrid host, as on the dev machine",
			in: "9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n" +
				"4:memory:/process_api/d3ad0305e9531f5d119e9e6dc7ca0b52\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n",
			want: procCgroup{V1: map[string]string{
				"name=systemd": "/", "pids": "/", "blkio": "/", "freezer": "/", "devices": "/",
				"memory": "/process_api/d3ad0305e9531f5d119e9e6dc7ca0b52", "cpuset": "/", "cpuacct": "/", "cpu": "/",
			}, V2: "/", HasV2: true},
		},
		{
			name: "co-mounted controllers",
			in:   "4:cpu,cpuacct:/user.slice\n3:net_cls,net_prio:/\n",
			want: procCgroup{V1: map[string]string{"cpu": "/user.slice", "cpuacct": "/user.slice", "net_cls": "/", "net_prio": "/"}},
		},
		{
			name: "unified, systemd user session",
			in:   "0::/user.slice/user-1000.slice/user@1000.service/app.slice/warden.scope\n",
			want: procCgroup{V1: map[string]string{}, V2: "/user.slice/user-1000.slice/user@1000.service/app.slice/warden.scope", HasV2: true},
		},
		{
			name: "path with a colon",
			in:   "0::/a:b\n",
			want: procCgroup{V1: map[string]string{}, V2: "/a:b", HasV2: true},
		},
		{name: "garbage", in: "hello\n", wantErr: true},
		{name: "relative path", in: "0::a/b\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcCgroup(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseProcCgroup error = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseProcCgroup mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMountInfo(t *testing.T) {
	const hybrid = `22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	const distro = `30 24 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,cpu,cpuacct
31 24 0:27 /docker/abc /sys/fs/cgroup/pids rw,nosuid shared:12 master:3 - cgroup cgroup rw,pids,clone_children
32 24 0:28 / /mnt/with\040space rw - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	tests := []struct {
		name string
		in   string
		want []mount
	}{
		{"hybrid dev host", hybrid, []mount{
			{Root: "/", Point: "/sys/fs/cgroup/cpu", Controllers: []string{"cpu"}},
			{Root: "/", Point: "/sys/fs/cgroup/memory", Controllers: []string{"memory"}},
			{Root: "/", Point: "/sys/fs/cgroup/systemd"},
			{Root: "/", Point: "/sys/fs/cgroup/unified", V2: true},
		}},
		{"co-mounted, container root, optional fields, escapes", distro, []mount{
			{Root: "/", Point: "/sys/fs/cgroup/cpu,cpuacct", Controllers: []string{"cpu", "cpuacct"}},
			{Root: "/docker/abc", Point: "/sys/fs/cgroup/pids", Controllers: []string{"pids"}},
			{Root: "/", Point: "/mnt/with space", V2: true},
		}},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMountInfo(strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("parseMountInfo: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseMountInfo mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := parseMountInfo(strings.NewReader("no separator here\n")); err == nil {
		t.Errorf("parseMountInfo(no separator) = nil error, want one")
	}
}

func TestUnescapeMountInfo(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/plain", "/plain"},
		{`/a\040b`, "/a b"},
		{`/tab\011x\012`, "/tab\tx\n"},
		{`/back\134slash`, `/back\slash`},
		{`/short\04`, `/short\04`},
		{`/not\999octal`, `/not\999octal`},
	}
	for _, tt := range tests {
		if got := unescapeMountInfo(tt.in); got != tt.want {
			t.Errorf("unescapeMountInfo(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
