package vmguest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// portWait bounds the search for the agent port: the virtio-serial driver
// names ports when QEMU's control message arrives, which may be just after
// /init starts.
const portWait = 5 * time.Second

// IsGuest reports whether this process looks like a microVM's init: PID 1
// run as "/init", which is how the kernel starts an initramfs's init. A
// container's init never has that argv[0]; Main confirms with CmdlineKey
// before it acts, so the test costs nothing on warden-init's other paths.
func IsGuest(argv []string) bool {
	return len(argv) > 0 && argv[0] == "/init" && os.Getpid() == 1
}

// Main is the guest's PID 1: it mounts /proc, /sys and /dev, sends the
// hello on the agent port and reads the host's Boot message. For a box it
// mounts the box's tree from the host's shares and becomes the boxed
// agent in it, without an exec, still PID 1 (its end panics the kernel, which ends the VM:
// PANIC_TIMEOUT=-1 and QEMU's -no-reboot); asked to echo, it echoes the
// port until the host closes it and ends the VM. It never returns; on any failure it says why
// on the console (which the host reads as hostile text) and ends the VM,
// since PID 1 exiting would only panic the kernel. The VM has no ACPI to
// power off with, so it ends with a reset: QEMU runs with -no-reboot,
// which turns the reset into its exit, and the kernel's reboot=t makes it
// an immediate triple fault.
//
// Without CmdlineKey it is not a Warden VM's init: it says so and exits
// with status 1, syncing and resetting nothing.
func Main() {
	start := bootTime()
	err := run(start)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warden-init:", err)
	}
	if errors.Is(err, errNotVM) {
		os.Exit(1)
	}
	unix.Sync()
	err = unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
	fmt.Fprintln(os.Stderr, "warden-init: reset:", err)
	os.Exit(1)
}

// errNotVM is run's refusal where the kernel did not start a Warden VM.
var errNotVM = errors.New("not a Warden microVM")

func run(start time.Duration) error {
	if err := mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
		return err
	}
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return fmt.Errorf("reading /proc/cmdline: %w", err)
	}
	if !hasField(string(cmdline), CmdlineKey) {
		return fmt.Errorf("%w: the kernel command line lacks %s; refusing to act as its init", errNotVM, CmdlineKey)
	}
	if err := mount("sysfs", "/sys", "sysfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
		return err
	}
	if err := mount("devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID|unix.MS_NOEXEC); err != nil {
		return err
	}
	port, err := openPort(PortName, time.Now().Add(portWait))
	if err != nil {
		return err
	}
	defer port.Close()
	if _, err := port.Write(Hello{Version: Version, BootTime: start, HelloTime: bootTime()}.Marshal()); err != nil {
		return fmt.Errorf("writing the hello: %w", err)
	}
	wakeHost()
	b, err := ReadBoot(port)
	if err != nil {
		return err
	}
	if !b.Echo {
		return becomeBox(port, b)
	}
	// Asked to echo, echo what the host sends: the port's round trip can
	// be proved and measured without a box. Plain reads and writes (no
	// ReaderFrom): a virtio port is a character device.
	buf := make([]byte, 4096)
	if _, err := io.CopyBuffer(struct{ io.Writer }{port}, struct{ io.Reader }{port}, buf); err != nil {
		return fmt.Errorf("echoing on %s until the host closes it: %w", PortName, err)
	}
	return nil
}

// wakeReads is more than the virtio-rng driver buffers (64 bytes), so a
// read of it always reaches the device.
const wakeReads = 256

// wakeHost reads the virtio-rng device. QEMU 7.2 takes the guest's
// opening of the port in its vCPU thread without waking its main loop,
// which watches the agent socket only once an iteration sees the port
// open: without a wake-up the host's first bytes (or its close) waited
// for QEMU's next timer, about a minute. An entropy request reaching the
// device wakes the main loop at once. A failure only costs that wait, so
// it is reported and ignored.
func wakeHost() {
	f, err := os.Open("/dev/hwrng")
	if err == nil {
		_, err = io.ReadFull(f, make([]byte, wakeReads))
		f.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "warden-init: waking QEMU through /dev/hwrng:", err)
	}
}

func mount(src, dst, fstype string, flags uintptr) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("creating %q: %w", dst, err)
	}
	if err := unix.Mount(src, dst, fstype, flags, ""); err != nil {
		return fmt.Errorf("mounting %s on %q: %w", fstype, dst, err)
	}
	return nil
}

// openPort finds the virtio-serial port called name and opens its device,
// retrying until deadline while the driver names it and devtmpfs makes
// the node.
func openPort(name string, deadline time.Time) (*os.File, error) {
	for {
		f, err := tryPort(name)
		if err == nil || time.Now().After(deadline) {
			return f, err
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func tryPort(name string) (*os.File, error) {
	names, err := filepath.Glob("/sys/class/virtio-ports/vport*/name")
	if err != nil {
		return nil, fmt.Errorf("listing virtio ports: %w", err)
	}
	for _, p := range names {
		b, err := os.ReadFile(p)
		if err != nil || string(bytes.TrimSpace(b)) != name {
			continue
		}
		dev := "/dev/" + filepath.Base(filepath.Dir(p))
		// Opened blocking and wrapped by os.NewFile, so Go's poller does
		// not take the port: its readiness reached epoll late here (the
		// first echo waited a minute), while a blocking read returns at once.
		fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		if err != nil {
			return nil, fmt.Errorf("opening the agent port %s: %w", dev, err)
		}
		return os.NewFile(uintptr(fd), dev), nil
	}
	return nil, fmt.Errorf("no virtio-serial port named %q: start QEMU with -device virtserialport,name=%s", name, name)
}

// hasField reports whether the space-separated line holds field exactly.
func hasField(line, field string) bool {
	for _, f := range strings.Fields(line) {
		if f == field {
			return true
		}
	}
	return false
}

// bootTime is CLOCK_BOOTTIME: time since the guest kernel started.
func bootTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
