// Package vmbox is the microvm backend: each box is one QEMU microVM
// (package microvm, the launcher) whose guest init (package vmguest)
// mounts the box's root and scratch from the host over 9p and becomes the
// same boxed agent the gVisor and Docker backends run, serving the agent
// protocol over a streammux stream on the VM's virtio-serial port.
package vmbox

// StateDir holds the microvm backend's host state: the root template the
// guests share read-only, the shared roots of the templates boxes ran on
// (img-<digest>-<layout>, rootfs.HoldImageTemplate; warden template gc
// removes those of removed templates), and one directory per box holding
// its root and its scratch tmpfs. It and each box's directory are root's
// alone (0700), and a scratch's root is its box's leased uid's alone
// (0700): each VM's launcher opens its shares itself and binds copies
// into QEMU's own mount namespace (package microvm), which holds only
// that box's shares, so no other uid, host user or box, has any business
// inside.
const StateDir = "/run/warden-microvm"
