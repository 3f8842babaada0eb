package gvisor

import (
	"fmt"
	"slices"

	"github.com/warden-sandbox/warden/internal/spec"
)

// Compression is how Checkpoint asks runsc to write a box's memory
// (Runtime.Compression): the operator's trade of disk, and the per-key
// budget a snapshot is charged from it, against resume time.
type Compression string

const (
	// CompressionNone writes the memory uncompressed, so a restore can
	// load its pages in the background and answer at once; it costs as
	// many bytes as the box's memory holds that are not zero. The
	// default.
	CompressionNone Compression = "none"
	// CompressionFast flate-compresses the memory at runsc's best speed
	// (runsc checkpoint --compression flate-best-speed): far fewer bytes
	// for memory that compresses, but a restore reads the whole image
	// before the box runs, and the box's own CPUs compress it.
	CompressionFast Compression = "fast"
)

// compressions are every Compression, in the order help and errors list
// them: the one list of the values.
var compressions = []Compression{CompressionNone, CompressionFast}

// CompressionChoices lists the values Validate accepts, as help and
// errors list them: "none or fast".
func CompressionChoices() string {
	names := make([]string, len(compressions))
	for i, c := range compressions {
		names[i] = string(c)
	}
	return spec.OrList(names)
}

// Validate refuses a compression other than those listed ("" is
// CompressionNone).
func (c Compression) Validate() error {
	if c == "" || slices.Contains(compressions, c) {
		return nil
	}
	return fmt.Errorf("snapshot compression %q: want %s", string(c), CompressionChoices())
}
