package microvm

import (
	"errors"
	"strings"
	"testing"
)

func TestChooseAccel(t *testing.T) {
	vmx := []byte("processor\t: 0\nflags\t\t: fpu vme vmx sse\n\nprocessor\t: 1\nflags\t\t: fpu\n")
	svm := []byte("flags\t: fpu svm lm\n")
	pvm := []byte("model name\t: Intel(R) Xeon(R)\nflags\t\t: fpu vme tsc hypervisor lm\n")
	tests := []struct {
		name    string
		version int
		kvmErr  error
		info    []byte
		infoErr error
		gid     uint32
		want    Accel
		reason  string
	}{
		{"real intel", 12, nil, vmx, nil, 108, KVM, "has vmx"},
		{"real amd", 12, nil, svm, nil, 108, KVM, "has svm"},
		{"root-only /dev/kvm", 12, nil, vmx, nil, 0, TCG, "non-root group"},
		{"software virtualiser", 12, nil, pvm, nil, 108, TCG, "neither vmx nor svm"},
		{"no /dev/kvm", 0, errors.New("open /dev/kvm: no such file or directory"), vmx, nil, 108, TCG, "/dev/kvm unusable"},
		{"odd api", 11, nil, vmx, nil, 108, TCG, "API 11"},
		{"no cpuinfo", 12, nil, nil, errors.New("permission denied"), 108, TCG, "cannot read /proc/cpuinfo"},
		{"flag as substring", 12, nil, []byte("flags\t: vmxnot svmish\n"), nil, 108, TCG, "neither"},
	}
	for _, tt := range tests {
		got := chooseAccel(hostProbe{
			kvmVersion: func() (int, error) { return tt.version, tt.kvmErr },
			cpuinfo:    func() ([]byte, error) { return tt.info, tt.infoErr },
			kvmNode:    func() (uint32, uint32, error) { return tt.gid, 0o20660, nil },
		})
		if got.Accel != tt.want || !strings.Contains(got.Reason, tt.reason) {
			t.Errorf("%s: chooseAccel = %+v, want %s because %q", tt.name, got, tt.want, tt.reason)
		}
		if strings.Contains(got.Reason, "\n") {
			t.Errorf("%s: reason %q is not one line", tt.name, got.Reason)
		}
	}
}
