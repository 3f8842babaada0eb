// Package vmbox is the microvm backend: each box is one QEMU microVM
// (package microvm, the launcher) whose guest init (package vmguest)
// mounts the box's root and scratch from the host over 9p and becomes the
// same boxed agent the gVisor and Docker backends run, serving the agent
// protocol over a streammux stream on the VM's virtio-serial port.
package vmbox

// StateDir holds the microvm backend's host state: the root template the
// guests share read-only, and one directory per box holding its scratch
// tmpfs. It is searchable by every user (0711) but listable by root only:
// each VM's QEMU runs under a host uid of its own and opens its shares by
// path, so it is not under /run/warden, which only root may enter.
const StateDir = "/run/warden-microvm"
