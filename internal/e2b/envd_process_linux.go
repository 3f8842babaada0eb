package e2b

import (
	"errors"

	"github.com/warden-sandbox/warden/internal/agent"
)

// startFailure is why the box could not start a program (not found, not
// executable, a working directory that does not exist), a fault of the
// request, or "" for any other error.
func startFailure(err error) string {
	var se *agent.StartError
	if errors.As(err, &se) {
		return se.Message
	}
	return ""
}
