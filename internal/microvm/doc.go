// Package microvm starts confined QEMU microVMs: one QEMU "microvm"
// machine (virtio-mmio, direct kernel boot, no PCI or firmware) per
// sandbox, whose guest init (vmguest) says hello on a virtio-serial port
// that the host holds as a byte stream for the agent protocol
// (streammux). QEMU itself is treated as exposed to a hostile guest: it
// runs as nobody with no capabilities, an empty environment, only the
// descriptors it needs, QEMU's seccomp sandbox, no network device, and in
// its own network and IPC namespaces; see docs/backends.md.
package microvm
