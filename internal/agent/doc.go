// Package agent is the host side of Warden's in-sandbox agent, the one
// piece every backend shares. Whatever builds a box (namespaces, gVisor,
// a Docker container), Warden's init runs in it as PID 1 and serves the
// protocol in nsinit; a backend only builds and tears down the box and
// hands this package a Frame: the connection to the agent, the box's
// cgroup if the host can divide it, and how to kill and clean up. Attach
// returns a Session that runs execs, starts interpreters' processes and
// reports results the same way for every backend, so a new backend (a
// microVM, a pod) is a new Frame, not a new session implementation.
package agent
