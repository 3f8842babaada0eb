//go:build !linux

package e2b

// startFailure has no box to hear from off Linux, where no process starts.
func startFailure(error) string { return "" }
