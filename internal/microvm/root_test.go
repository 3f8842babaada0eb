package microvm

import (
	"slices"
	"strings"
	"testing"
)

// TestRootBinds: QEMU's root holds /dev/kvm under KVM only, an initrd
// bind only for an initrd file, each share at its host path (writable
// only when the share is), and nothing else writable or executable but
// the binary and its libraries.
func TestRootBinds(t *testing.T) {
	libs := []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64"}
	shares := []Share{{Tag: "ro", Dir: "/srv/ro", ReadOnly: true}, {Tag: "rw", Dir: "/srv/rw"}}
	for _, tc := range []struct {
		name       string
		accel      Accel
		initrdFile bool
		shares     []Share
		want       []string
	}{
		{"tcg", TCG, false, nil, []string{qemuBinary, libs[0], libs[1], firmware, "/dev/null", guestKernel}},
		{"kvm", KVM, false, nil, []string{qemuBinary, libs[0], libs[1], firmware, "/dev/null", "/dev/kvm", guestKernel}},
		{"initrd file", TCG, true, nil, []string{qemuBinary, libs[0], libs[1], firmware, "/dev/null", guestKernel, guestInitrd}},
		{"shares", TCG, false, shares, []string{qemuBinary, libs[0], libs[1], firmware, "/dev/null", guestKernel, "/srv/ro", "/srv/rw"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs := rootBinds(tc.accel, libs, tc.initrdFile, tc.shares)
			var got []string
			for _, b := range bs {
				got = append(got, b.Dst)
				if b.Writable != (b.Dst == "/srv/rw") {
					t.Errorf("bind %s writable = %v", b.Dst, b.Writable)
				}
				if b.Exec != (b.Dst == qemuBinary || slices.Contains(libs, b.Dst)) {
					t.Errorf("bind %s exec = %v, want exec for the binary and its libraries only", b.Dst, b.Exec)
				}
				if b.Dev != strings.HasPrefix(b.Dst, "/dev/") {
					t.Errorf("bind %s dev = %v, want device nodes for /dev's binds only", b.Dst, b.Dev)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("QEMU's root binds %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCheckShares: each bad share directory gets one line naming the
// share and what is wrong.
func TestCheckShares(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		want string // "" for accepted
	}{
		{"/srv/data", ""},
		{"/tmp/work", ""},
		{"", "not an absolute path"},
		{"srv/data", "not an absolute path"},
		{"/srv/../etc", "not clean"},
		{"/srv/data/", "not clean"},
		{"/", "host's root cannot be shared"},
		{"/usr", "overlaps /usr"},
		{"/usr/share/doc", "overlaps /usr"},
		{"/dev/shm", "overlaps /dev"},
		{"/vm", "overlaps /vm"},
		{"/proc", "overlaps /proc"},
		{"/proc/1/root", "overlaps /proc"},
		{"/sys/fs/cgroup", "overlaps /sys"},
	} {
		err := checkShares([]Share{{Tag: "t", Dir: tc.dir}})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("share %q: %v, want accepted", tc.dir, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("share %q: %v, want one line saying %q", tc.dir, err, tc.want)
		}
	}
	for _, tc := range []struct {
		a, b, want string
	}{
		{"/srv", "/srv", "shared twice"},
		{"/srv", "/srv/inner", "inside or holds the share /srv"},
		{"/srv/inner", "/srv", "share \"a\": directory \"/srv/inner\" is inside or holds the share /srv"},
		{"/srv/a/b/c", "/srv/a", "inside or holds"},
	} {
		err := checkShares([]Share{{Tag: "a", Dir: tc.a}, {Tag: "b", Dir: tc.b}})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("shares %s and %s: %v, want one line saying %q", tc.a, tc.b, err, tc.want)
		}
	}
	if err := checkShares([]Share{{Tag: "a", Dir: "/srv/a"}, {Tag: "b", Dir: "/srv/ab"}}); err != nil {
		t.Errorf("shares /srv/a and /srv/ab: %v, want accepted (neither holds the other)", err)
	}
}
