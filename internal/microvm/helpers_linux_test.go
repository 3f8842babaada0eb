package microvm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// testKernel is the guest kernel the boot tests use: the one this build
// boots (GuestKernel), or a skip (a failure under WARDEN_CI=1) saying why.
func testKernel(t testing.TB) string {
	t.Helper()
	kernel, _ := testGuestKernel(t)
	return kernel
}

// testKernelArgs are the guest kernel's own boot arguments under this
// host's accelerator (GuestKernel).
func testKernelArgs(t testing.TB) []string {
	t.Helper()
	_, args := testGuestKernel(t)
	return args
}

func testGuestKernel(t testing.TB) (string, []string) {
	kernel, args, err := GuestKernel(HostAccel().Accel)
	if err != nil {
		testhost.SkipOrFail(t, "no microVM guest kernel to boot: "+err.Error())
	}
	return kernel, args
}

// needQEMU skips unless QEMU can be started confined here (as root).
func needQEMU(t testing.TB) {
	t.Helper()
	testhost.RequireRoot(t)
	testhost.RequireTool(t, "qemu-system-x86_64")
}

// testInitramfs builds warden-init as make build does (static) and wraps
// it in the guest initramfs, once per test binary.
func testInitramfs(t testing.TB) []byte {
	t.Helper()
	testhost.RequireTool(t, "go")
	initrd, err := builtInitramfs()
	if err != nil {
		t.Fatal(err)
	}
	return initrd
}

var builtInitramfs = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "warden-init-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "warden-init")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/warden-sandbox/warden/cmd/warden-init")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building warden-init: %w: %s", err, out)
	}
	f, err := os.Open(bin)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Initramfs(f)
})
