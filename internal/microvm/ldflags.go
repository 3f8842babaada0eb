package microvm

import (
	_ "embed"
	"strings"
)

// initLDFlags is init.ldflags, which the Makefile reads too.
//
//go:embed init.ldflags
var initLDFlags string

// InitLDFlags are the linker flags warden-init is built with, by make
// build and by every test that builds its own: no symbol table or DWARF
// (-s -w), as the binary is every microVM's initramfs, which the guest
// copies under emulation, and is a third smaller so (Go's tracebacks
// keep their function names and lines). One file holds them, so a test
// never boots another init than the one shipped.
func InitLDFlags() string { return strings.TrimSpace(initLDFlags) }
