package doctor

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/microvm"
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
	saved, savedOutdated := microVMKernel, outdatedKernel
	t.Cleanup(func() { microVMKernel, outdatedKernel = saved, savedOutdated })
	outdatedKernel = func() error { return nil }
	tests := []struct {
		kernel string
		err    error
		status Status
		want   string
	}{
		{"", errors.New("not built: run `make microvm-kernel`"), Warn, "guest kernel not built"},
		{"/cache/vmlinux", nil, OK, "guest kernel /cache/vmlinux"},
	}
	for _, tt := range tests {
		microVMKernel = func(microvm.Accel) (string, []string, error) { return tt.kernel, nil, tt.err }
		c := microVMCheck(context.Background())
		if c.Status != tt.status || !strings.Contains(c.Detail, tt.want) || !strings.Contains(c.Detail, "QEMU emulator version") || !strings.Contains(c.Detail, "accel ") {
			t.Errorf("microVMCheck = %+v, want %s with %q, QEMU's version and the accel", c, tt.status, tt.want)
		}
	}
}
