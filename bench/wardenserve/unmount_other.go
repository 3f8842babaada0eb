//go:build !linux

package wardenserve

// unmountUnder has nothing to do where Warden mounts nothing.
func unmountUnder(string) error { return nil }
