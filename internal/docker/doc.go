// Package docker is the Docker backend: each box is a container of an
// image (Warden's own root by default), made through the Docker Engine
// API with no capabilities but the init's, no-new-privileges, a read-only
// root, Docker's seccomp profile under Warden's own, no network, and
// Warden's init bound in as PID 1, serving the same agent protocol as in
// every backend.
//
// It speaks the dozen Engine API calls it needs itself, over the socket
// with net/http, instead of linking the moby client: that client's
// dependencies (distribution/reference's regular expressions, go-digest)
// cost about 1.1 ms of package initialisation in every warden process,
// which every CLI run starts, and every sandbox too when warden runs
// itself as the init (see docs/backends.md).
package docker
