package microvm

import (
	"bytes"
	"fmt"
	"sync"
)

// Accel is the QEMU accelerator a VM runs under.
type Accel string

// The accelerators: KVM (hardware virtualisation) where the host truly has
// it, else TCG (QEMU's software emulation: slower, but the same isolation
// boundary of a separate guest kernel).
const (
	KVM Accel = "kvm"
	TCG Accel = "tcg"
)

// AccelChoice is the accelerator this host gets and why, in one line.
type AccelChoice struct {
	Accel  Accel
	Reason string
}

// kvmAPIVersion is the only KVM API version there has ever been (KVM_GET_API_VERSION).
const kvmAPIVersion = 12

// hostProbe is what the choice reads from the host, injectable so tests
// fake both answers.
type hostProbe struct {
	// kvmVersion opens /dev/kvm and returns its KVM_GET_API_VERSION.
	kvmVersion func() (int, error)
	// cpuinfo returns /proc/cpuinfo.
	cpuinfo func() ([]byte, error)
	// kvmNode stats /dev/kvm: its group and mode.
	kvmNode func() (gid, mode uint32, err error)
}

// chooseAccel takes KVM only where it is truly usable: /dev/kvm opens and
// speaks API 12 AND the CPU flags show hardware virtualisation (vmx or
// svm). A software virtualiser behind /dev/kvm (kvm_pvm) passes the first
// two yet cannot run a stock Linux guest ("KVM internal error ...
// emulation failure"), so the flags decide. QEMU, under its own uid, opens
// /dev/kvm through its group, so a root-only group means TCG too.
func chooseAccel(p hostProbe) AccelChoice {
	v, err := p.kvmVersion()
	switch {
	case err != nil:
		return AccelChoice{TCG, fmt.Sprintf("/dev/kvm unusable (%v): software emulation", err)}
	case v != kvmAPIVersion:
		return AccelChoice{TCG, fmt.Sprintf("/dev/kvm speaks API %d, not %d: software emulation", v, kvmAPIVersion)}
	}
	info, err := p.cpuinfo()
	if err != nil {
		return AccelChoice{TCG, fmt.Sprintf("cannot read /proc/cpuinfo (%v): software emulation", err)}
	}
	flag := virtFlag(info)
	if flag == "" {
		return AccelChoice{TCG, "/dev/kvm opens but the CPU flags have neither vmx nor svm (a software virtualiser such as kvm_pvm): software emulation"}
	}
	gid, mode, err := p.kvmNode()
	if err == nil {
		err = kvmGroupUsable(gid, mode)
	}
	if err != nil {
		return AccelChoice{TCG, fmt.Sprintf("the CPU has %s but %v: software emulation", flag, err)}
	}
	return AccelChoice{KVM, "/dev/kvm API 12 and the CPU has " + flag}
}

// kvmGroupUsable says whether QEMU, running under its own uid with
// /dev/kvm's group, can open /dev/kvm: the group must not be root's and
// must be able to read and write it.
func kvmGroupUsable(gid, mode uint32) error {
	if gid == 0 || mode&0o060 != 0o060 {
		return fmt.Errorf("/dev/kvm is gid %d mode %o, and QEMU (under its own uid) needs it read-write by a non-root group (e.g. kvm, mode 0660)", gid, mode&0o777)
	}
	return nil
}

// virtFlag returns "vmx" or "svm" if the first processor's flags hold it.
func virtFlag(cpuinfo []byte) string {
	for line := range bytes.Lines(cpuinfo) {
		key, val, ok := bytes.Cut(line, []byte(":"))
		if !ok || string(bytes.TrimSpace(key)) != "flags" {
			continue
		}
		for _, f := range bytes.Fields(val) {
			if s := string(f); s == "vmx" || s == "svm" {
				return s
			}
		}
		return ""
	}
	return ""
}

// hostAccel decides once per process: the host does not change under it.
var hostAccel = sync.OnceValue(func() AccelChoice { return chooseAccel(realProbe) })

// HostAccel is the accelerator VMs on this host use, and why.
func HostAccel() AccelChoice { return hostAccel() }
