package rootfs

import (
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// TestEtcAllowlistHasNoSecrets guards the curated /etc: none of these may
// ever reach a sandbox from the host.
func TestEtcAllowlistHasNoSecrets(t *testing.T) {
	secrets := []string{"shadow", "gshadow", "shadow-", "gshadow-", "passwd", "group", "ssh",
		"machine-id", "sudoers", "sudoers.d", "security", "pam.d", "krb5.keytab", "docker",
		"hostname", "hosts", "resolv.conf", "subuid", "subgid", "environment", "netrc",
		"ssl", "ssl/private"}
	for _, s := range secrets {
		if slices.Contains(EtcAllowlist, s) {
			t.Errorf("EtcAllowlist contains %q, which must never come from the host", s)
		}
	}
}

func TestGeneratedEtc(t *testing.T) {
	etc := GeneratedEtc("sandbox")
	tests := []struct {
		file, want string
	}{
		{"passwd", "sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\n"},
		{"group", "sandbox:x:1000:\n"},
		{"hostname", "sandbox\n"},
		{"hosts", "127.0.0.1\tlocalhost sandbox\n"},
	}
	for _, tt := range tests {
		if got := etc[tt.file]; !strings.Contains(got, tt.want) {
			t.Errorf("generated /etc/%s = %q, want it to contain %q", tt.file, got, tt.want)
		}
	}
}

func TestMasksCoverKnownLeaks(t *testing.T) {
	for _, p := range []string{"kcore", "keys", "sysrq-trigger", "timer_list", "sched_debug", "kallsyms", "irq", "fs"} {
		if !slices.Contains(MaskedProcPaths, p) {
			t.Errorf("MaskedProcPaths lacks %q", p)
		}
	}
	if !slices.Contains(ReadonlyProcPaths, "sys") {
		t.Errorf("ReadonlyProcPaths lacks sys")
	}
}

func TestTmpfsData(t *testing.T) {
	tests := []struct {
		mode         string
		size, inodes int64
		uid, gid     int
		want         string
	}{
		{"0755", 4096, 16, 1000, 1000, "mode=0755,size=4096,nr_inodes=16,uid=1000,gid=1000"},
		{"0755", 65536, 0, -1, -1, "mode=0755,size=65536"},
	}
	for _, tt := range tests {
		if got := tmpfsData(tt.mode, tt.size, tt.inodes, tt.uid, tt.gid); got != tt.want {
			t.Errorf("tmpfsData() = %q, want %q", got, tt.want)
		}
	}
}

// TestImageEntry: a template's top level is shown as the image has it,
// except what Warden provides itself and hidden names it works in.
func TestImageEntry(t *testing.T) {
	tests := []struct {
		name string
		mode fs.FileMode
		want ImageEntryKind
	}{
		{"usr", fs.ModeDir, ImageDir},
		{"opt", fs.ModeDir, ImageDir},
		{"var", fs.ModeDir, ImageDir},
		{"bin", fs.ModeSymlink, ImageLink},
		{"lib64", fs.ModeSymlink, ImageLink},
		{"marker", 0, ImageFile},
		{"etc", fs.ModeDir, ImageSkipped},
		{"proc", fs.ModeDir, ImageSkipped},
		{"dev", fs.ModeDir, ImageSkipped},
		{"tmp", fs.ModeDir, ImageSkipped},
		{"home", fs.ModeDir, ImageSkipped},
		{"workspace", fs.ModeSymlink, ImageSkipped},
		{"run", fs.ModeDir, ImageSkipped},
		{"sys", fs.ModeDir, ImageSkipped},
		{".scratch", fs.ModeDir, ImageSkipped},
		{".dockerenv", 0, ImageSkipped},
		{"null", fs.ModeDevice | fs.ModeCharDevice, ImageSkipped},
		{"fifo", fs.ModeNamedPipe, ImageSkipped},
		{"a/b", fs.ModeDir, ImageSkipped},
	}
	for _, tt := range tests {
		if got := ImageEntry(tt.name, tt.mode); got != tt.want {
			t.Errorf("ImageEntry(%q, %v) = %d, want %d", tt.name, tt.mode, got, tt.want)
		}
	}
}
