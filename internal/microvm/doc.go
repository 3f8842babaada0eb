// Package microvm starts confined QEMU microVMs: one QEMU "microvm"
// machine (virtio-mmio, direct kernel boot, no PCI, only QEMU's minimal
// qboot firmware) per
// sandbox, whose guest init (vmguest) says hello on a virtio-serial port
// that the host holds as a byte stream for the agent protocol
// (streammux). QEMU itself is treated as exposed to a hostile guest: it
// runs under a host uid leased for it alone with no capabilities, an
// empty environment, only the descriptors warden gives it, QEMU's seccomp
// sandbox, no network device, and in its own PID, network and IPC
// namespaces. It still sees the host's files and is not yet under a
// seccomp filter of warden's: docs/backends.md says what is missing.
package microvm
