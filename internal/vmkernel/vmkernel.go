// Package vmkernel is the microVM backend's guest kernel: its build
// inputs (config.fragment, build.sh, embedded here) and the lookup of the
// kernel built from them in the root-owned cache. `make microvm-kernel`
// runs build.sh, which builds the kernel from Debian's linux-source-6.1
// and installs it as Dir/kernel-<key>/; Find picks the one built from this
// binary's inputs, so a warden never boots a kernel configured for
// another build. Nothing here runs a program: the source package's
// version is read from the manifest the build wrote.
package vmkernel

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"time"
)

// Dir is the cache build.sh installs kernels into (its default; the
// WARDEN_MICROVM_CACHE it honours is for building elsewhere by hand).
const Dir = "/var/cache/warden/microvm"

// BuildMinutes is about how long `make microvm-kernel` takes on a
// 2-core host, for the error that asks for it (10.3 min measured on a
// loaded one).
const BuildMinutes = 11

// fragment and script are the build's inputs: build.sh hashes the same
// two files into the manifest's "inputs".
var (
	//go:embed config.fragment
	fragment []byte
	//go:embed build.sh
	script []byte
)

// Kernel is an installed guest kernel.
type Kernel struct {
	// Vmlinux is the uncompressed, stripped kernel QEMU boots by its PVH
	// entry note.
	Vmlinux string
	// Config is the kernel's final .config, for reading what it has.
	Config string
	// Key names the build: a hash of Inputs and Source.
	Key string
	// Source is the linux-source-6.1 package version it was built from.
	Source string
	// Built is when the build finished.
	Built time.Time

	// cache and name are where Find found it, for Open.
	cache cache
	name  string
}

// Open opens the kernel's vmlinux for QEMU, checking again on the way
// that the cache, every directory above it, the kernel's directory and
// the file are root's and writable by no one else, and opening each
// relative to the one checked before it without following a link. The
// launcher binds this descriptor's file into QEMU's root, never looking
// the path up again, so the file QEMU boots is the file checked, whatever
// is renamed in the meantime. The caller closes it.
func (k Kernel) Open() (*os.File, error) {
	return k.open()
}

// Inputs is the hash of this binary's build inputs, as build.sh computes
// it (`build.sh --inputs`): sha256 over one line per file, its name and
// its sha256.
func Inputs() string {
	line := fmt.Sprintf("config.fragment %x\nbuild.sh %x\n", sha256.Sum256(fragment), sha256.Sum256(script))
	return sum(line)
}

// Key is the name of a build from inputs and the source package version
// source, as build.sh computes it.
func Key(inputs, source string) string {
	return sum(fmt.Sprintf("inputs %s\nsource %s\n", inputs, source))
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// Find returns the kernel built from this binary's inputs, or an error
// saying how to build it.
func Find() (Kernel, error) {
	return cache{dir: Dir, uid: 0}.find(Inputs())
}

// errMissing is Find's answer when no kernel of these inputs is built.
func errMissing() error {
	return fmt.Errorf("no microVM kernel built for this warden: run `make microvm-kernel` (about %d min on 2 cores)", BuildMinutes)
}
