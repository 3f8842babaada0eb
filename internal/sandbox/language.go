package sandbox

import (
	"fmt"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
)

// UnknownLanguage is the one error for a language no interpreter serves,
// worded the same by every front end (HTTP API, E2B, MCP): invalid, so a
// client's fault (errors.Is spec.ErrInvalid), and naming the languages
// that are served (errors.Is interp.ErrUnknownLanguage).
func UnknownLanguage(language string) error {
	return fmt.Errorf("%w: %w", spec.ErrInvalid, interp.UnknownError(language))
}
