package doctor

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/microvm"
	"github.com/warden-sandbox/warden/internal/testhost"
	"github.com/warden-sandbox/warden/internal/vmkernel"
)

// TestMicroVMCheck: the microvm line names QEMU, the accelerator and the
// kernel, and says how to build a missing kernel, without failing doctor.
func TestMicroVMCheck(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		c := microVMCheck(context.Background())
		if c.Status != Warn || !strings.Contains(c.Fix, "qemu-system-x86") {
			t.Errorf("without QEMU: %+v, want a warning saying to install it", c)
		}
		return
	}
	saved, savedSource, savedConfine := microVMKernel, kernelSource, microVMConfinement
	t.Cleanup(func() { microVMKernel, kernelSource, microVMConfinement = saved, savedSource, savedConfine })
	microVMConfinement = func() error { return nil }
	tests := []struct {
		kernel    string
		err       error
		sourceErr error
		status    Status
		want, fix string
	}{
		{"", errors.New("not built: run `make microvm-kernel`"), nil, Warn, "guest kernel: not built", "make microvm-kernel"},
		{"", fmt.Errorf("%w: no hypervisor flag", microvm.ErrTSCUnknown), nil, Warn, "TSC frequency", "usable KVM"},
		{"/cache/vmlinux", nil, errors.New("built from linux-source 6.1.1-1, installed is 6.1.2-1"), Warn, "installed is 6.1.2-1", "make microvm-kernel"},
		{"/cache/vmlinux", nil, nil, OK, "guest kernel /cache/vmlinux", ""},
	}
	for _, tt := range tests {
		microVMKernel = func(microvm.Accel) (vmkernel.Kernel, []string, error) {
			return vmkernel.Kernel{Vmlinux: tt.kernel}, nil, tt.err
		}
		kernelSource = func(vmkernel.Kernel) error { return tt.sourceErr }
		c := microVMCheck(context.Background())
		if c.Status != tt.status || !strings.Contains(c.Detail, tt.want) || !strings.Contains(c.Fix, tt.fix) || !strings.Contains(c.Detail, "QEMU emulator version") || !strings.Contains(c.Detail, "accel ") {
			t.Errorf("microVMCheck = %+v, want %s with %q, QEMU's version and the accel, fix %q", c, tt.status, tt.want, tt.fix)
		}
	}
}

// TestMicroVMCheckConfinement: a host that cannot confine QEMU gets a
// warning saying so and what to do, before the guest kernel is looked at.
func TestMicroVMCheckConfinement(t *testing.T) {
	testhost.RequireTool(t, "qemu-system-x86_64") // the line without QEMU is TestMicroVMCheck's
	saved := microVMConfinement
	t.Cleanup(func() { microVMConfinement = saved })
	microVMConfinement = func() error { return errors.New("open_tree: function not implemented") }
	c := microVMCheck(context.Background())
	if c.Status != Warn || !strings.Contains(c.Detail, "cannot be confined") || !strings.Contains(c.Detail, "open_tree") || !strings.Contains(c.Fix, "Linux 5.12") {
		t.Errorf("microVMCheck on a host without open_tree = %+v, want a warning naming it and the fix", c)
	}
}
