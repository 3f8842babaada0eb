//go:build !linux

package native

import (
	"errors"
	"fmt"
	"os"

	"github.com/warden-sandbox/warden/internal/fontcache"
)

// UseFontCache does nothing off Linux, where no native sandbox runs.
func UseFontCache(fontcache.Store) {}

// FontBuilderArg0 is the font list builder's argv[0] (Linux only).
const FontBuilderArg0 = "warden-font-cache"

// IsFontBuilder says argv is the font list builder's.
func IsFontBuilder(argv []string) bool { return len(argv) == 1 && argv[0] == FontBuilderArg0 }

// FontBuilderMain fails off Linux.
func FontBuilderMain() {
	fmt.Fprintln(os.Stderr, "warden: building matplotlib's font list:", errors.ErrUnsupported)
	os.Exit(1)
}
