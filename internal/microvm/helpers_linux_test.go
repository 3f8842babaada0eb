package microvm

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// testKernel is the guest kernel the boot tests use, the one place they
// look for it: until the kernel's Go lookup (vmkernel.Find) is merged, the
// path another step of the build wrote down.
func testKernel(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("/work/notes/kernel-ready")
	if err != nil {
		testhost.SkipOrFail(t, "no microVM guest kernel built (make microvm-kernel)")
	}
	p := strings.TrimSpace(string(b))
	if _, err := os.Stat(p); err != nil {
		testhost.SkipOrFail(t, "the microVM guest kernel is missing: "+err.Error())
	}
	return p
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

// testKernelArgs are the guest kernel's own boot arguments, as its package
// gives them (vmkernel.BootArgs with the host's TSC frequency under TCG,
// which this helper becomes at merge): a reset by triple fault, and the
// TSC's frequency so that no boot hangs calibrating it.
func testKernelArgs(t testing.TB) []string {
	t.Helper()
	args := []string{"reboot=t"}
	if HostAccel().Accel != TCG {
		return args
	}
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(info)) {
		key, val, _ := strings.Cut(line, ":")
		if strings.TrimSpace(key) != "cpu MHz" {
			continue
		}
		mhz, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || mhz < 100 || mhz > 20000 {
			t.Fatalf("cpu MHz %q in /proc/cpuinfo is implausible", val)
		}
		khz := int(math.Round(mhz * 1000))
		return append(args, "tsc_early_khz="+strconv.Itoa(khz), "lpj="+strconv.Itoa(khz*10), "tsc=reliable")
	}
	t.Fatal("no cpu MHz in /proc/cpuinfo")
	return nil
}
