package e2e

import (
	"slices"
	"strings"
	"testing"
)

// TestNormaliseExecutorReport: two reports of the same sandbox made in
// two runs normalise equal, and a change of anything the test compares
// is a difference naming its field. Pure: it starts no sandbox.
func TestNormaliseExecutorReport(t *testing.T) {
	report := func(mountinfo, uidMap, fd1, cpus string) probeOutput {
		return probeOutput{
			"Mountinfo": mountinfo,
			"UIDMap":    uidMap,
			"GIDMap":    uidMap,
			"FDs":       map[string]any{"0": "/dev/null", "1": fd1},
			"Status":    map[string]any{"Cpus_allowed_list": cpus, "NoNewPrivs": "1"},
			"Procs":     []any{"1 0 warden-init 1000 1000 1000 1000", "2 1 diffprobe 1000 1000 1000 1000"},
			"Env":       []any{"HOME=/home/sandbox", "PATH=/usr/bin"},
		}
	}
	const (
		mountsA = "500 400 0:57 / / ro,relatime - tmpfs tmpfs rw,size=4096k,uid=2113994752,gid=2113994752\n" +
			"501 500 254:0 /usr /usr ro,nosuid,nodev,relatime master:1 - ext4 /dev/vda rw\n" +
			"502 500 0:58 / /tmp rw,nosuid,nodev - tmpfs tmpfs rw,size=262144k,uid=2113994752\n" +
			"503 502 0:59 / /tmp rw,nosuid,nodev - tmpfs tmpfs rw,size=1024k"
		// The same sandbox, another run: new mount ids, anonymous
		// devices, peer group and leased host id.
		mountsB = "900 800 0:81 / / ro,relatime - tmpfs tmpfs rw,size=4096k,uid=2113994753,gid=2113994753\n" +
			"901 900 254:0 /usr /usr ro,nosuid,nodev,relatime master:7 - ext4 /dev/vda rw\n" +
			"902 900 0:82 / /tmp rw,nosuid,nodev - tmpfs tmpfs rw,size=262144k,uid=2113994753\n" +
			"903 902 0:83 / /tmp rw,nosuid,nodev - tmpfs tmpfs rw,size=1024k"
	)
	base := normalise(report(mountsA, "1000 2113994752 1", "pipe:[123]", "1"))
	same := normalise(report(mountsB, "1000 2113994753 1", "pipe:[456]", "0"))
	if d := diffReports(base, same); len(d) != 0 {
		t.Errorf("the same sandbox in two runs: got differences %+v, want none", d)
	}
	tests := []struct {
		name, mounts, uidMap, fd1, cpus, field string
	}{
		{"a mount option", strings.Replace(mountsB, "/usr ro,nosuid,nodev", "/usr ro,nosuid", 1), "1000 2113994753 1", "pipe:[456]", "0", "Mountinfo//usr"},
		{"propagation", strings.Replace(mountsB, "master:7", "shared:7", 1), "1000 2113994753 1", "pipe:[456]", "0", "Mountinfo//usr"},
		{"a stacked mount's parent", strings.Replace(mountsB, "903 902", "903 900", 1), "1000 2113994753 1", "pipe:[456]", "0", "Mountinfo//tmp#2"},
		{"a tmpfs of the host's root", strings.Replace(mountsB, "size=262144k,uid=2113994753", "size=262144k,uid=0", 1), "1000 2113994753 1", "pipe:[456]", "0", "Mountinfo//tmp"},
		{"the inside uid", mountsB, "0 2113994753 1", "pipe:[456]", "0", "UIDMap"},
		{"a descriptor's kind", mountsB, "1000 2113994753 1", "/dev/null", "0", "FDs/1"},
		{"the CPU count", mountsB, "1000 2113994753 1", "pipe:[456]", "0-1", "Status/Cpus_allowed_list"},
	}
	for _, tt := range tests {
		got := normalise(report(tt.mounts, tt.uidMap, tt.fd1, tt.cpus))
		d := diffReports(base, got)
		if !slices.ContainsFunc(d, func(f fieldDiff) bool { return f.field == tt.field }) {
			t.Errorf("%s changed: got differences %+v, want one in %s", tt.name, d, tt.field)
		}
	}
}

// TestCatPid: cat's pid is compared by rank, so the Go init's 7 and a
// C init's 2 are equal, and PID 1 or a bad field stays as it is.
func TestCatPid(t *testing.T) {
	for _, c := range []struct{ in, want string }{{"7", "rank2"}, {"2", "rank2"}, {"1", "1"}, {"", ""}, {"7 3", "7 3"}} {
		if got := catPid(c.in); got != c.want {
			t.Errorf("catPid(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestFastUnavailable: only exit 125 with one `warden: --executor fast`
// line naming warden-exec is a reason to skip; anything else fails.
func TestFastUnavailable(t *testing.T) {
	for _, c := range []struct {
		name string
		inv  invocation
		want bool
	}{
		{"not started yet", invocation{code: 125, stderr: "warden: --executor fast: this warden cannot build sandboxes with warden-exec yet; use --executor auto or go\n"}, true},
		{"not built", invocation{code: 125, stderr: "warden: --executor fast: warden-exec not found next to warden; run make build\n"}, true},
		{"other exit", invocation{code: 1, stderr: "warden: --executor fast: warden-exec not found next to warden; run make build\n"}, false},
		{"another refusal", invocation{code: 125, stderr: "warden: --workspace: no such directory\n"}, false},
		{"more than one line", invocation{code: 125, stderr: "warden: --executor fast: warden-exec crashed\nsegfault\n"}, false},
		{"program failed", invocation{code: 127, stderr: "warden: true: not found\n"}, false},
	} {
		if got := fastUnavailable(c.inv); got != c.want {
			t.Errorf("%s: fastUnavailable(exit %d, %q) = %v, want %v", c.name, c.inv.code, c.inv.stderr, got, c.want)
		}
	}
}
