package microvm

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/vmkernel"
)

func TestNormalize(t *testing.T) {
	ok := Config{Kernel: "/k", Initrd: []byte{}}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"defaults", func(*Config) {}, ""},
		{"no kernel", func(c *Config) { c.Kernel = "" }, "make microvm-kernel"},
		{"kernel by descriptor", func(c *Config) { c.Kernel, c.KernelFile = "", os.Stdin }, ""},
		{"no initrd", func(c *Config) { c.Initrd = nil }, "exactly one"},
		{"two initrds", func(c *Config) { c.InitrdPath = "/i" }, "exactly one"},
		{"initrd by descriptor", func(c *Config) { c.Initrd, c.InitrdFile = nil, os.Stdin }, ""},
		{"initrd bytes and descriptor", func(c *Config) { c.InitrdFile = os.Stdin }, "exactly one of Initrd, InitrdPath and InitrdFile"},
		{"tiny memory", func(c *Config) { c.MemoryMiB = 8 }, "memory 8 MiB"},
		{"the kernel's most cpus", func(c *Config) { c.CPUs = vmkernel.MaxCPUs }, ""},
		{"one cpu past the kernel's", func(c *Config) { c.CPUs = vmkernel.MaxCPUs + 1 }, fmt.Sprintf("%d vCPUs", vmkernel.MaxCPUs+1)},
		{"two kernels", func(c *Config) { c.KernelFile = os.Stdin }, "exactly one of Kernel and KernelFile"},
		{"bad accel", func(c *Config) { c.Accel = "hvf" }, `"hvf"`},
		{"negative timeout", func(c *Config) { c.BootTimeout = -time.Second }, "boot timeout -1s is outside"},
		{"huge timeout", func(c *Config) { c.BootTimeout = 1 << 62 }, "is outside 0-1h0m0s"},
		{"space in param", func(c *Config) { c.Cmdline = []string{"a b"} }, "one token"},
		{"quote in param", func(c *Config) { c.Cmdline = []string{`a="b`} }, "quote"},
		{"override console", func(c *Config) { c.Cmdline = []string{"console=ttyS0"} }, "overrides"},
		{"override init", func(c *Config) { c.Cmdline = []string{"rdinit=/bin/sh"} }, "overrides"},
		{"override kernel arg", func(c *Config) { c.KernelArgs, c.Cmdline = []string{"reboot=t"}, []string{"reboot=k"} }, "overrides"},
		{"kernel arg overrides launcher", func(c *Config) { c.KernelArgs = []string{"console=ttyS0"} }, "overrides"},
		{"space in kernel arg", func(c *Config) { c.KernelArgs = []string{"a b"} }, "one token"},
		{"override vm key", func(c *Config) { c.Cmdline = []string{"warden.vm=0"} }, "overrides"},
		{"fine param", func(c *Config) { c.Cmdline = []string{"loglevel=7"} }, ""},
		{"fractional quota", func(c *Config) { c.CPUQuota = 0.5 }, ""},
		{"quota over vCPUs", func(c *Config) { c.CPUQuota = 1.5 }, "CPU quota 1.5 is outside 0-1"},
		{"negative quota", func(c *Config) { c.CPUQuota = -1 }, "CPU quota -1 is outside"},
		{"shares", func(c *Config) { c.Shares = []Share{{"root", "/r", true}, {"scratch", "/s", false}} }, ""},
		{"share tag twice", func(c *Config) { c.Shares = []Share{{"root", "/r", true}, {"root", "/s", false}} }, "used twice"},
		{"share tag with comma", func(c *Config) { c.Shares = []Share{{"a,b", "/r", true}} }, `holds ','`},
		{"share dir with comma", func(c *Config) { c.Shares = []Share{{"root", "/r,readonly=off", true}} }, "holds a comma"},
		{"relative share dir", func(c *Config) { c.Shares = []Share{{"root", "r", true}} }, "not an absolute path"},
		{"unclean share dir", func(c *Config) { c.Shares = []Share{{"root", "/r/../etc", true}} }, "not clean"},
		{"too many shares", func(c *Config) {
			for i := range maxShares + 1 {
				c.Shares = append(c.Shares, Share{fmt.Sprintf("s%d", i), fmt.Sprintf("/s%d", i), false})
			}
		}, "more than the 6"},
	}
	for _, tt := range tests {
		c := ok
		tt.edit(&c)
		got, err := c.normalize()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: normalize = %v, want no error", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: normalize = %v, want an error containing %q", tt.name, err, tt.want)
		case tt.name == "defaults" && (got.MemoryMiB != DefaultMemoryMiB || got.CPUs != 1 || got.BootTimeout != DefaultBootTimeout):
			t.Errorf("defaults: got %+v", got)
		}
	}
}

// TestArgs checks the confinement options QEMU always gets, the kernel
// command line's parts in order, and TCG's bounded translation cache.
func TestArgs(t *testing.T) {
	cfg, err := Config{Kernel: "/k", Initrd: []byte{}, KernelArgs: []string{"reboot=t"}, Cmdline: []string{"loglevel=7"}}.normalize()
	if err != nil {
		t.Fatal(err)
	}
	tcg := args(cfg, TCG)
	for _, want := range [][]string{
		{"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"},
		{"-accel", "tcg,tb-size=128"},
		{"-kernel", "/vm/vmlinux"},
		{"-initrd", "/vm/initrd"},
		{"-chardev", "socket,id=agent,fd=3"},
		{"-append", "console=hvc0 quiet rdinit=/init warden.vm=1 reboot=t loglevel=7"},
		{"-m", "256"},
		// No ERMS: TCG runs rep movsb/stosb a byte per iteration.
		{"-cpu", "max,erms=off"},
		// The PIT is the guest's timer under TCG, its interrupt through the PIC: without them an idle guest never wakes.
		{"-machine", "microvm,x-option-roms=off,pit=on,pic=on,isa-serial=off,rtc=on,acpi=off"},
	} {
		if i := slices.Index(tcg, want[0]); !containsPair(tcg, want[0], want[1]) {
			t.Errorf("TCG args lack %s %s (have %v at %d)", want[0], want[1], tcg, i)
		}
	}
	for _, banned := range []string{"-netdev", "-net", "-nic", "-monitor", "-qmp"} {
		if slices.Contains(tcg, banned) {
			t.Errorf("args hold %s: QEMU must get no network device and no monitor", banned)
		}
	}
	if kvm := strings.Join(args(cfg, KVM), " "); !strings.Contains(kvm, "-accel kvm -cpu host") {
		t.Errorf("KVM args = %s, want -accel kvm -cpu host", kvm)
	}
	if kvm := args(cfg, KVM); !containsPair(kvm, "-machine", "microvm,x-option-roms=off,pit=off,pic=off,isa-serial=off,rtc=on,acpi=off") {
		t.Errorf("KVM args = %v, want the machine without the PIT and PIC (kvmclock and the TSC deadline timer need neither)", kvm)
	}
}

// TestShareArgs: each share is a 9p device on the local backend under
// security_model=none, a read-only one refused writes by QEMU and with its
// mounts' inode numbers remapped.
func TestShareArgs(t *testing.T) {
	cfg, err := Config{Kernel: "/k", Initrd: []byte{}, Shares: []Share{{"root", "/run/r", true}, {"scratch", "/run/s", false}}}.normalize()
	if err != nil {
		t.Fatal(err)
	}
	a := args(cfg, TCG)
	for _, want := range [][]string{
		{"-fsdev", "local,id=fs0,path=/run/r,security_model=none,readonly=on,multidevs=remap"},
		{"-device", "virtio-9p-device,fsdev=fs0,mount_tag=root"},
		{"-fsdev", "local,id=fs1,path=/run/s,security_model=none"},
		{"-device", "virtio-9p-device,fsdev=fs1,mount_tag=scratch"},
	} {
		if !containsPair(a, want[0], want[1]) {
			t.Errorf("args lack %s %s: %v", want[0], want[1], a)
		}
	}
}

func TestCheckAccel(t *testing.T) {
	tests := []struct {
		name  string
		accel Accel
		cfg   Config
		want  string // "" for ok, else a substring of the error
	}{
		{"one vCPU under TCG", TCG, Config{CPUs: 1}, ""},
		{"two vCPUs under TCG", TCG, Config{CPUs: 2}, "2 vCPUs under TCG"},
		{"two vCPUs under KVM", KVM, Config{CPUs: 2}, ""},
		{"TCG's arguments under TCG", TCG, Config{CPUs: 1, KernelArgs: vmkernel.BootArgs(2300000, true)}, ""},
		{"KVM's arguments under KVM", KVM, Config{CPUs: 1, KernelArgs: vmkernel.BootArgs(0, false)}, ""},
		{"TCG's arguments under KVM", KVM, Config{CPUs: 1, KernelArgs: vmkernel.BootArgs(2300000, true)}, `"mitigations=off" is for TCG only`},
		{"TCG timer argument in Cmdline under KVM", KVM, Config{CPUs: 1, Cmdline: []string{"noapictimer"}}, `"noapictimer" is for TCG only`},
		{"dashed spelling under KVM", KVM, Config{CPUs: 1, Cmdline: []string{"no-timer-check"}}, `"no-timer-check" is for TCG only`},
		{"other mitigations value under KVM", KVM, Config{CPUs: 1, Cmdline: []string{"mitigations=auto"}}, ""},
	}
	for _, tt := range tests {
		err, got := tt.cfg.checkAccel(tt.accel), ""
		if err != nil {
			got = err.Error()
		}
		if (tt.want == "") != (err == nil) || !strings.Contains(got, tt.want) {
			t.Errorf("%s: checkAccel(%s) = %q, want %q", tt.name, tt.accel, got, tt.want)
		}
	}
}

func containsPair(args []string, flag, val string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag && args[i+1] == val {
			return true
		}
	}
	return false
}
