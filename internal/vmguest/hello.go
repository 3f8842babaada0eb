// Package vmguest is the guest side of a Warden microVM: the PID 1 that
// the guest kernel runs from the initramfs (warden-init as /init), and the
// boot handshake it sends the host over the agent's virtio-serial port.
// The host parses that handshake strictly, as everything from a guest is
// hostile input.
package vmguest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// PortName is the name of the virtio-serial port that carries the agent
// protocol: QEMU announces it to the guest (-device virtserialport,name=),
// and the guest finds it under /sys/class/virtio-ports/*/name.
const PortName = "warden.agent"

// CmdlineKey, on the guest kernel's command line, marks a Warden microVM:
// the guest init mounts /proc to read the command line and, without the
// key, exits with status 1 and nothing else (no sync, no reset), so
// warden-init started as /init anywhere else mounts /proc and goes.
const CmdlineKey = "warden.vm=1"

// Hello is the first frame a guest writes on the agent port, saying its
// init runs. Its fixed size leaves no length for a guest to lie about.
type Hello struct {
	// Version is the guest's handshake version; the host accepts only its own.
	Version uint32
	// BootTime is the guest's CLOCK_BOOTTIME when /init started: how long
	// the kernel took to run init, as far as its clock counts (it starts
	// only once the kernel has a clocksource).
	BootTime time.Duration
	// HelloTime is the guest's CLOCK_BOOTTIME as it sends the hello, so
	// HelloTime-BootTime is /init's own start (mounts, finding the port).
	HelloTime time.Duration
}

// Version is the handshake version this build speaks, in the hello and
// the boot message. Version 2: after the hello the guest reads one Boot,
// then either echoes the port (Boot.Echo) or builds the box and becomes
// its agent, serving the protocol over streammux on the port. (Version 1
// only echoed.) Version 3: the Boot carries the box's memory limit.
const Version = 3

// helloMagic opens the hello frame, so the host tells a Warden guest from
// any other bytes on the port at the first read.
const helloMagic = "WRDNHELO"

// HelloSize is the hello frame's length in bytes: magic, version, the two times.
const HelloSize = len(helloMagic) + 4 + 8 + 8

// maxBootTime bounds a plausible BootTime: a guest claiming longer is lying
// or broken, and the value would otherwise flow into reports.
const maxBootTime = time.Hour

// ErrBadHello marks a frame that is not a valid hello from this version.
var ErrBadHello = errors.New("bad microVM hello")

// Marshal returns h's frame.
func (h Hello) Marshal() []byte {
	b := make([]byte, 0, HelloSize)
	b = append(b, helloMagic...)
	b = binary.BigEndian.AppendUint32(b, h.Version)
	b = binary.BigEndian.AppendUint64(b, uint64(h.BootTime))
	return binary.BigEndian.AppendUint64(b, uint64(h.HelloTime))
}

// ReadHello reads exactly one hello frame from r and checks it. It reads
// no more than HelloSize bytes; bounding the wait is the caller's (a read
// deadline on the port).
func ReadHello(r io.Reader) (Hello, error) {
	var b [HelloSize]byte
	if n, err := io.ReadFull(r, b[:]); err != nil {
		return Hello{}, fmt.Errorf("reading the microVM hello (%d of %d bytes, starting %s): %w", n, HelloSize, quote(b[:n]), err)
	}
	if string(b[:len(helloMagic)]) != helloMagic {
		return Hello{}, fmt.Errorf("%w: starts %s, not %q: the guest is not warden-init", ErrBadHello, quote(b[:len(helloMagic)]), helloMagic)
	}
	rest := b[len(helloMagic):]
	h := Hello{
		Version:   binary.BigEndian.Uint32(rest),
		BootTime:  time.Duration(binary.BigEndian.Uint64(rest[4:])),
		HelloTime: time.Duration(binary.BigEndian.Uint64(rest[12:])),
	}
	switch {
	case h.Version != Version:
		return Hello{}, fmt.Errorf("%w: version %d, this warden speaks %d: rebuild the guest initramfs from this warden", ErrBadHello, h.Version, Version)
	case h.BootTime < 0 || h.HelloTime < h.BootTime || h.HelloTime > maxBootTime:
		return Hello{}, fmt.Errorf("%w: implausible boot times %d ns and %d ns", ErrBadHello, int64(h.BootTime), int64(h.HelloTime))
	}
	return h, nil
}

// quote renders guest bytes for an error message: Go-quoted, so control
// characters cannot reach a terminal or log.
func quote(b []byte) string { return strconv.QuoteToASCII(string(b)) }
