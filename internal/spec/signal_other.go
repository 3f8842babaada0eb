//go:build !unix

package spec

import "fmt"

// SignalName is "signal N" where the system has no signal names, or "" for 0.
func SignalName(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("signal %d", n)
}
