// Package microvm starts confined QEMU microVMs: one QEMU "microvm"
// machine (virtio-mmio, direct kernel boot, no PCI, only QEMU's minimal
// qboot firmware) per
// sandbox, whose guest init (vmguest) says hello on a virtio-serial port
// that the host holds as a byte stream for the agent protocol
// (streammux). QEMU itself is treated as exposed to a hostile guest: it
// runs under a host uid leased for it alone with no capabilities, an
// empty environment, only the descriptors warden gives it, Warden's own
// seccomp filter from before its exec with QEMU's seccomp sandbox on top,
// no network device, and in its own PID, network, IPC, UTS and mount
// namespaces, whose root is a read-only tmpfs holding only what QEMU
// needs (docs/backends.md lists it and why).
package microvm
