package microvm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/warden-sandbox/warden/internal/testhost"
	"github.com/warden-sandbox/warden/internal/vmguest"
)

// askEcho sends the guest the boot message that makes it echo the port.
func askEcho(t testing.TB, vm *VM) {
	t.Helper()
	msg, err := vmguest.Boot{Echo: true}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vm.Stream().Write(msg); err != nil {
		t.Fatal(err)
	}
}

// guestConfig is a VM of the guest kernel this build boots (GuestKernel,
// opened by Kernel.Open as the backend does: the descriptor QEMU gets) and
// warden-init as /init, or a skip (a failure under WARDEN_CI=1) saying why
// there is none; vmlinux is the kernel's path, which QEMU's fd 3 shows.
func guestConfig(t testing.TB) (cfg Config, vmlinux string) {
	t.Helper()
	k, args, err := GuestKernel(HostAccel().Accel)
	if err != nil {
		testhost.SkipOrFail(t, "no microVM guest kernel to boot: "+err.Error())
	}
	f, err := k.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	})
	return Config{KernelFile: f, KernelArgs: args, Initrd: testInitramfs(t)}, k.Vmlinux
}

// testConfig is guestConfig's Config alone.
func testConfig(t testing.TB) Config {
	t.Helper()
	cfg, _ := guestConfig(t)
	return cfg
}

// needQEMU skips (a failure under WARDEN_CI=1) unless QEMU can be
// started confined here: as root, with QEMU, on a host CheckConfinement
// accepts.
func needQEMU(t testing.TB) {
	t.Helper()
	testhost.RequireRoot(t)
	testhost.RequireTool(t, "qemu-system-x86_64")
	if err := CheckConfinement(); err != nil {
		testhost.SkipOrFail(t, "QEMU cannot be confined here: "+err.Error())
	}
}

// testInitramfs builds warden-init as make build does (static, stripped) and wraps
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
	cmd := exec.Command("go", "build", "-ldflags", InitLDFlags(), "-o", bin, "github.com/warden-sandbox/warden/cmd/warden-init")
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
