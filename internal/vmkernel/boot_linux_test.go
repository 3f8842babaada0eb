package vmkernel

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// initLine is what testInit prints once it runs.
const initLine = "vmkernel-test: /init ran"

// testInit is the initramfs's /init: it says it ran on the console the
// kernel opened for it, waits for a line from the host (so that the
// console has carried its line out before the VM ends), and reboots,
// which ends QEMU (-no-reboot).
const testInit = `package main

import (
	"fmt"
	"os"
	"syscall"
)

func main() {
	fmt.Println("` + initLine + `")
	_, _ = os.Stdin.Read(make([]byte, 1))
	syscall.Sync()
	_ = syscall.Reboot(syscall.LINUX_REBOOT_CMD_RESTART)
}
`

// TestBoot boots the installed kernel (make microvm-kernel) under QEMU's
// microvm machine with BootArgs and a virtio console like the backend's,
// and checks that it reaches /init and that a reboot ends the VM. QEMU
// gets the kernel as the descriptor Kernel.Open checked. One
// vCPU: under TCG two hung about one boot in five after "Run /init" (see
// docs/backends.md). TCG is slow, so the bound on the wait is generous;
// no time is asserted.
func TestBoot(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the microVM kernel is built for x86-64")
	}
	k, err := Find()
	if err != nil {
		testhost.SkipOrFail(t, err.Error())
	}
	qemu := testhost.RequireTool(t, "qemu-system-x86_64")
	initrd := testInitramfs(t)
	khz, err := HostTSCKHz()
	if err != nil {
		// Without tsc_early_khz about one TCG boot in four hung.
		testhost.SkipOrFail(t, "the TCG boot needs the host's TSC rate: "+err.Error())
	}
	kernel, err := k.Open()
	if err != nil {
		t.Fatalf("opening the kernel: %v", err)
	}
	defer kernel.Close()
	args := append([]string{"console=hvc0", "panic=-1"}, BootArgs(khz, true)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu,
		"-M", "microvm,x-option-roms=off,pit=off,pic=off,rtc=on,acpi=off", "-accel", "tcg", "-cpu", "max",
		"-m", "256", "-smp", "1", "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-kernel", "/dev/fd/3", "-initrd", initrd, "-append", strings.Join(args, " "),
		"-device", "virtio-serial-device", "-chardev", "stdio,id=c", "-device", "virtconsole,chardev=c",
		"-device", "virtio-rng-device")
	cmd.ExtraFiles = []*os.File{kernel}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &boundedBuffer{max: 1 << 20, want: initLine, seen: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting QEMU: %v", err)
	}
	// Once /init's line is out, the line /init waits for lets it reboot.
	go func() {
		select {
		case <-out.seen:
			_, _ = stdin.Write([]byte("\n"))
		case <-ctx.Done():
		}
	}()
	err = cmd.Wait()
	if got := out.String(); err != nil || !strings.Contains(got, initLine) {
		t.Fatalf("booting %s: got %v and console output\n%s\nwant /init's line and QEMU's exit", k.Vmlinux, err, tail(got, 4096))
	}
}

// testInitramfs builds testInit statically and writes an uncompressed
// newc cpio holding it as /init, /dev/console and /proc.
func testInitramfs(t *testing.T) string {
	t.Helper()
	goTool := testhost.RequireTool(t, "go")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(testInit), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(goTool, "build", "-trimpath", "-o", "init", "main.go")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GO111MODULE=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test /init: %v\n%s", err, out)
	}
	initBin, err := os.ReadFile(filepath.Join(dir, "init"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	entries := []struct {
		name         string
		mode         uint32
		major, minor int
		data         []byte
	}{
		{"dev", 0o040755, 0, 0, nil},
		{"dev/console", 0o020600, 5, 1, nil},
		{"proc", 0o040755, 0, 0, nil},
		{"init", 0o100755, 0, 0, initBin},
		{"TRAILER!!!", 0, 0, 0, nil},
	}
	for i, e := range entries {
		fmt.Fprintf(&b, "070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
			i+1, e.mode, 0, 0, 1, 0, len(e.data), 0, 0, e.major, e.minor, len(e.name)+1, 0)
		b.WriteString(e.name + "\x00")
		pad(&b)
		b.Write(e.data)
		pad(&b)
	}
	p := filepath.Join(dir, "initrd.cpio")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// pad aligns the archive to 4 bytes, as newc wants after names and data.
func pad(b *bytes.Buffer) {
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
}

// boundedBuffer keeps the first max bytes written to it from QEMU and
// the guest, dropping the rest, and closes seen once they hold want.
type boundedBuffer struct {
	buf  testhost.SyncBuffer
	max  int
	n    atomic.Int64
	want string
	seen chan struct{}
	once sync.Once
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := int64(b.max) - b.n.Add(int64(len(p))) + int64(len(p)); room > 0 {
		_, _ = b.buf.Write(p[:min(int64(len(p)), room)])
	}
	if strings.Contains(b.buf.String(), b.want) {
		b.once.Do(func() { close(b.seen) })
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string { return b.buf.String() }

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
